#!/usr/bin/env bash
# Installs everything circuitbreaker needs to build, test and demonstrate
# itself, then the package. Safe to run again: it installs only what is
# missing, and reinstalls the package only when its sources changed.
#
# Dependencies come from Debian's prebuilt r-cran-* packages where the
# machine has apt (seconds instead of many minutes of compiling on 2 cores);
# anything still missing is installed from CRAN.
set -euo pipefail
cd "$(dirname "$0")/.."

# R packages: needed to build (Rcpp, R6, cli, rlang), to test and check
# (testthat, withr, callr, webfakes, httr, httr2, curl, promises, later,
# future, jsonlite, httpuv, plumber, shiny, knitr, rmarkdown), to benchmark
# (bench), to lint (lintr, for tools/lint.sh) and to regenerate Collate
# (roxygen2, for tools/check-collate.sh).
r_packages=(Rcpp R6 cli rlang testthat withr callr webfakes httr httr2 curl promises later
            future jsonlite httpuv plumber shiny knitr rmarkdown bench lintr roxygen2)
# Other tools: a C++17 compiler and make for the package and the C++ tests,
# Catch2 (v2, single header) for the C++ tests, pandoc for the vignettes,
# promtool (in Debian's prometheus) to validate the metrics endpoint,
# Chromium for the one real-browser test of the Shiny app, and clang-format-14
# for tools/lint.sh's check of the C++ formatting; hiredis (the Redis store's
# client library, found by ./configure) and redis-server (started by the
# Redis store's tests on 127.0.0.1, a random port); iproute2 (ip, tc) for the
# tests that simulate several hosts with network namespaces.
system_packages=(g++ make catch2 pandoc prometheus chromium clang-format-14 libhiredis-dev redis-server iproute2)
system_commands=(g++ make pandoc promtool chromium clang-format-14 redis-server)
# With CB_SETUP_HARDENING=1 (CI does this): clang and its runtimes for the
# libFuzzer target (tests/cpp, `make fuzz`).
if [ "${CB_SETUP_HARDENING:-0}" = 1 ]; then
  system_packages+=(clang-14 libclang-rt-14-dev)
  system_commands+=(clang++-14)
  [ -n "$(ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] || need_fuzzer=1
fi

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi
}

missing_r_packages() {
  Rscript --vanilla -e 'p <- commandArgs(TRUE); ok <- vapply(p, requireNamespace, logical(1), quietly = TRUE); cat(p[!ok])' "$@"
}

missing=$(missing_r_packages "${r_packages[@]}")
need_system=${need_fuzzer:-0}
[ -f /usr/include/catch2/catch.hpp ] || need_system=1
[ -f /usr/include/hiredis/hiredis.h ] || need_system=1
for c in "${system_commands[@]}"; do command -v "$c" >/dev/null || need_system=1; done

if { [ -n "$missing" ] || [ "$need_system" = 1 ]; } && command -v apt-get >/dev/null; then
  debs=("${system_packages[@]}")
  for p in $missing; do debs+=("r-cran-$(echo "$p" | tr '[:upper:]' '[:lower:]')"); done
  echo "setup: installing from Debian: ${debs[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
  missing=$(missing_r_packages "${r_packages[@]}")
fi
if [ -n "$missing" ]; then
  echo "setup: installing from CRAN: $missing"
  Rscript --vanilla -e 'install.packages(commandArgs(TRUE), repos = "https://cloud.r-project.org", Ncpus = 2)' $missing
  missing=$(missing_r_packages "${r_packages[@]}")
  [ -z "$missing" ] || { echo "setup: could not install: $missing" >&2; exit 1; }
fi

# The package itself, rebuilt from scratch (headers are not tracked by R's
# make) whenever its sources differ from the installed copy.
hash=$(cat DESCRIPTION NAMESPACE configure $(git ls-files R src inst 2>/dev/null || find R src inst -type f) 2>/dev/null | md5sum | cut -d' ' -f1)
installed=$(Rscript --vanilla -e 'f <- system.file("source-hash", package = "circuitbreaker"); if (nzchar(f)) cat(readLines(f))' 2>/dev/null || true)
if [ "$hash" != "$installed" ]; then
  echo "setup: installing circuitbreaker from source"
  R CMD INSTALL --preclean . >/tmp/circuitbreaker-install.log 2>&1 || {
    cat /tmp/circuitbreaker-install.log >&2
    exit 1
  }
  lib=$(Rscript --vanilla -e 'cat(dirname(system.file(package = "circuitbreaker")))')
  echo "$hash" > "$lib/circuitbreaker/source-hash"
  rm -f src/*.o src/*.so
fi
echo "setup: ready"
