#!/usr/bin/env bash
# Installs everything circuitbreaker needs to build, test and demonstrate
# itself, then the package. Safe to run again: it installs only what is
# missing, and reinstalls the package only when its sources changed.
#
#   bash tools/setup.sh           lane 1: Debian's packages (the oldest we support)
#   bash tools/setup.sh --lane2   lane 2 as well: the current CRAN releases of the
#                                 packages we call, built into a kept library
#                                 (tools/lane2.R), and the package installed
#                                 against them; prints `lane2-libs: <R_LIBS>`
#
# Lane 2's library is $CB_LANE2_LIB, by default
# /var/cache/circuitbreaker/lane2-R<major.minor>: outside the clone, so that
# CI on the same machine keeps it between runs and a warm run builds nothing.
#
# Dependencies come from Debian's prebuilt r-cran-* packages where the
# machine has apt (seconds instead of many minutes of compiling on 2 cores);
# anything still missing is installed from CRAN.
set -euo pipefail
cd "$(dirname "$0")/.."
lane2=0
for arg in "$@"; do
  case "$arg" in
    --lane2) lane2=1 ;;
    *) echo "usage: bash tools/setup.sh [--lane2]" >&2; exit 2 ;;
  esac
done

# R packages: needed to build (Rcpp, R6, cli, rlang), to test and check
# (testthat, withr, callr, webfakes, httr, httr2, curl, promises, later,
# future, jsonlite, httpuv, plumber, shiny, knitr, rmarkdown), to benchmark
# (bench), to lint (lintr, for tools/lint.sh) and to regenerate Collate
# (roxygen2, for tools/check-collate.sh).
# mirai (and nanonext), which Debian does not package, come from CRAN.
r_packages=(Rcpp R6 cli rlang testthat withr callr webfakes httr httr2 curl promises later
            future jsonlite httpuv plumber shiny knitr rmarkdown bench lintr roxygen2 mirai)
# Other tools: a C++17 compiler and make for the package and the C++ tests,
# Catch2 (v2, single header) for the C++ tests, pandoc for the vignettes,
# promtool (in Debian's prometheus) to validate the metrics endpoint,
# Chromium for the one real-browser test of the Shiny app, and clang-format-14
# for tools/lint.sh's check of the C++ formatting; hiredis (the fleet store's
# client library, found by ./configure) and redis-server (started by the
# fleet store's tests on 127.0.0.1, a random port); iproute2 (ip, tc) for the
# tests that simulate several hosts with network namespaces; OpenSSL's
# headers (libssl-dev, found by ./configure: TLS, rediss://, for the Redis
# store) and its command (openssl, with which the TLS tests make their
# certificates: inst/redis/redis-tls.R).
system_packages=(g++ make catch2 pandoc prometheus chromium clang-format-14 libhiredis-dev redis-server iproute2
                 libssl-dev openssl)
system_commands=(g++ make pandoc promtool chromium clang-format-14 redis-server openssl)
# With CB_SETUP_HARDENING=1 (CI does this): clang and its runtimes for the
# libFuzzer target (tests/cpp, `make fuzz`), and a mingw-w64 cross compiler
# for the check that every header compiles on its own for Windows too
# (`make headers`).
# Lane 2 builds packages from source that link against system libraries:
# curl (and httr2, otelsdk) against libcurl; plumber2's graphics stack (ragg,
# svglite, textshaping, systemfonts) against freetype, fontconfig, harfbuzz,
# fribidi and the image libraries; sodium, xml2 and openssl; otelsdk's bundled
# opentelemetry-cpp against protobuf (and cmake, which the machine has).
if [ "$lane2" = 1 ]; then
  lane2_headers=(curl/curl.h harfbuzz/hb.h fribidi/fribidi.h ft2build.h fontconfig/fontconfig.h png.h
                 tiffio.h jpeglib.h webp/decode.h sodium.h libxml2/libxml/parser.h openssl/ssl.h
                 google/protobuf/message.h)
  system_packages+=(libcurl4-openssl-dev libharfbuzz-dev libfribidi-dev libfreetype6-dev libfontconfig1-dev
                    libpng-dev libtiff-dev libjpeg-dev libwebp-dev libsodium-dev libxml2-dev libssl-dev
                    libprotobuf-dev protobuf-compiler cmake)
  for h in "${lane2_headers[@]}"; do
    [ -f "/usr/include/$h" ] || [ -n "$(ls /usr/include/*/"$h" 2>/dev/null)" ] || need_lane2_system=1
  done
fi
if [ "${CB_SETUP_HARDENING:-0}" = 1 ]; then
  system_packages+=(clang-14 libclang-rt-14-dev g++-mingw-w64-x86-64-posix)
  system_commands+=(clang++-14 x86_64-w64-mingw32-g++-posix)
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
[ "${need_lane2_system:-0}" = 1 ] && need_system=1
[ -f /usr/include/catch2/catch.hpp ] || need_system=1
[ -f /usr/include/hiredis/hiredis.h ] || need_system=1
[ -f /usr/include/openssl/ssl.h ] || need_system=1
for c in "${system_commands[@]}"; do command -v "$c" >/dev/null || need_system=1; done

# Another apt or dpkg (unattended-upgrades, a second setup) may hold the
# locks: wait for it, up to 5 minutes, saying so, rather than fail at once.
apt_lock_files=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock)
wait_for_apt() {
  command -v fuser >/dev/null || return 0  # then apt-get's own Lock::Timeout below waits
  local waited=0
  while as_root fuser "${apt_lock_files[@]}" >/dev/null 2>&1; do
    if [ "$waited" = 0 ]; then
      echo "setup: another apt or dpkg holds its lock; waiting for it (up to 5 minutes)"
    fi
    if [ "$waited" -ge 300 ]; then
      echo "setup: apt's lock is still held after 5 minutes; run this again when it is free" >&2
      exit 1
    fi
    sleep 5
    waited=$((waited + 5))
  done
  [ "$waited" = 0 ] || echo "setup: apt's lock is free after ${waited} s"
}
apt_get() {
  wait_for_apt
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@"
}

if { [ -n "$missing" ] || [ "$need_system" = 1 ]; } && command -v apt-get >/dev/null; then
  debs=("${system_packages[@]}")
  apt_get update -qq
  for p in $missing; do
    deb="r-cran-$(echo "$p" | tr '[:upper:]' '[:lower:]')"
    # Only what Debian has; the rest comes from CRAN below.
    if apt-cache show "$deb" >/dev/null 2>&1; then debs+=("$deb"); fi
  done
  echo "setup: installing from Debian: ${debs[*]}"
  apt_get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
  missing=$(missing_r_packages "${r_packages[@]}")
fi
if [ -n "$missing" ]; then
  # Compiled from source (mirai and nanonext: about a minute on 2 cores); the
  # compiler's output goes to a log, shown only if something failed.
  echo "setup: compiling from CRAN: $missing (log: /tmp/circuitbreaker-cran.log)"
  Rscript --vanilla -e 'install.packages(commandArgs(TRUE), repos = "https://cloud.r-project.org", Ncpus = 2)' $missing \
    >/tmp/circuitbreaker-cran.log 2>&1 || true
  missing=$(missing_r_packages "${r_packages[@]}")
  [ -z "$missing" ] || { cat /tmp/circuitbreaker-cran.log >&2; echo "setup: could not install: $missing" >&2; exit 1; }
fi

# The package itself, rebuilt from scratch (headers are not tracked by R's
# make) whenever its sources differ from the installed copy: into R's default
# library (lane 1), or into lane 2's own package library. Installed from the
# tarball `R CMD build` makes, as from CRAN, so that its vignettes are built
# and installed too (vignette("getting-started", package = "circuitbreaker")):
# `R CMD INSTALL .` skips them. About a minute more, only when sources changed.
install_package() {  # install_package <library or ""> <R_LIBS for the build>
  local lib=$1 libs=$2 hash installed target build_dir tarball src_dir
  src_dir=$(pwd)
  hash=$(cat DESCRIPTION NAMESPACE configure $(git ls-files R src inst vignettes 2>/dev/null || find R src inst vignettes -type f) 2>/dev/null | md5sum | cut -d' ' -f1)
  installed=$(R_LIBS="$libs" Rscript --vanilla -e 'f <- system.file("source-hash", package = "circuitbreaker"); if (nzchar(f)) cat(readLines(f))' 2>/dev/null || true)
  [ "$hash" = "$installed" ] && return 0
  echo "setup: building circuitbreaker and its vignettes, and installing it${lib:+ into $lib}"
  build_dir=$(mktemp -d)
  (cd "$build_dir" && R_LIBS="$libs" R CMD build --no-manual --no-resave-data "$src_dir") \
    >/tmp/circuitbreaker-install.log 2>&1 || {
    cat /tmp/circuitbreaker-install.log >&2
    rm -rf "$build_dir"
    exit 1
  }
  tarball=$(ls "$build_dir"/circuitbreaker_*.tar.gz)
  R_LIBS="$libs" R CMD INSTALL ${lib:+-l "$lib"} "$tarball" >>/tmp/circuitbreaker-install.log 2>&1 || {
    cat /tmp/circuitbreaker-install.log >&2
    rm -rf "$build_dir"
    exit 1
  }
  rm -rf "$build_dir"
  target=$(R_LIBS="$libs" Rscript --vanilla -e 'cat(dirname(system.file(package = "circuitbreaker")))')
  echo "$hash" > "$target/circuitbreaker/source-hash"
  rm -f src/*.o src/*.so
}
install_package "" "${R_LIBS:-}"

if [ "$lane2" = 1 ]; then
  r_minor=$(Rscript --vanilla -e 'cat(R.version$major, sub("[.].*", "", R.version$minor), sep = ".")')
  lane2_lib=${CB_LANE2_LIB:-/var/cache/circuitbreaker/lane2-R$r_minor}
  as_root mkdir -p "$lane2_lib" && as_root chown "$(id -u)" "$lane2_lib" "$(dirname "$lane2_lib")" 2>/dev/null || true
  # One build at a time per kept library (two CI runs on one machine).
  exec 9>"$lane2_lib.lock"
  flock 9
  Rscript --vanilla tools/lane2.R "$lane2_lib"
  flock -u 9
  mkdir -p "$lane2_lib.circuitbreaker"
  install_package "$lane2_lib.circuitbreaker" "$lane2_lib.circuitbreaker:$lane2_lib"
  echo "lane2-libs: $lane2_lib.circuitbreaker:$lane2_lib"
fi
echo "setup: ready"
