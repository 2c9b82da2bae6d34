#!/usr/bin/env bash
# Lints the R code and checks the formatting of the C++ code; CI runs it
# after the tests (.ci/run). Exits non-zero on any lint or formatting error.
#
#   bash tools/lint.sh            check every file (what CI runs)
#   bash tools/lint.sh --changed  check only the files changed since the branch left main
#                                 (committed or not; CB_LINT_BASE names another base)
#   bash tools/lint.sh --fix      first reformat the C++ files in place (clang-format-14 -i),
#                                 then check (lintr has no fixer: R lints are only reported)
#
# R: lintr with the project's .lintr, on R/ (without the generated
# R/RcppExports.R), tests/testthat/, bench/ (and its folders), inst/redis/ (the tests' and
# benchmarks' redis-server) and any R scripts in tools/.
# The .lintr keeps lintr's default linters with three changes:
#   - line_length_linter(120): the code base's width (R/ has 4 longer lines, ~140 above 100);
#   - object_name_linter also accepts CamelCase (R6 class generators such as
#     CircuitBreaker) and SNAKE_CASE (constants such as OUTCOME_SUCCESS);
#   - no cyclocomp_linter: it scores a whole R6 class, or a validator that is a chain
#     of `||`, as one complex function, and lintr itself dropped it from the
#     defaults in 3.2.0. It is also the slowest linter after object_usage_linter.
# The test files are linted with testthat attached and the helpers
# (tests/testthat/helper-*.R) loaded, as testthat runs them, so that
# object_usage_linter knows expect_*() and the helpers. object_usage_linter
# resolves the package's own functions in the installed circuitbreaker.
#
# C++: when the repository has a .clang-format, every hand-written C++ file
# (inst/include/circuitbreaker/*.hpp and its folders, src/*.cpp and *.h except the generated
# src/RcppExports.cpp, tests/cpp/*.cpp and *.hpp, bench/cpp/*.cpp) must be
# unchanged by clang-format-14 (--dry-run --Werror). Without clang-format-14
# (tools/setup.sh installs it) the check is skipped with a warning, or fails
# when CB_LINT_STRICT=1 (CI sets it).
#
# All files by default: about 25 s on 2 cores, against 2-3 s for a change
# to a file or two (--changed), but only a full run sees what a change broke
# elsewhere (a renamed function used by an unchanged test), and on main,
# where CI also runs, nothing is "changed". --changed is for quick local runs.
set -uo pipefail
cd "$(dirname "$0")/.."

fix=0
changed=0
for arg in "$@"; do
  case "$arg" in
    --fix) fix=1 ;;
    --changed) changed=1 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lint: unknown argument: $arg (use --changed, --fix or --help)" >&2; exit 2 ;;
  esac
done

shopt -s nullglob
status=0
summary=()

# With --changed: the files that differ from the merge base with main
# (committed, staged or not) and the new untracked ones.
if [ "$changed" = 1 ]; then
  base_ref=${CB_LINT_BASE:-main}
  base=$(git merge-base HEAD "$base_ref" 2>/dev/null) || {
    echo "lint: --changed: no merge base with $base_ref (set CB_LINT_BASE)" >&2
    exit 2
  }
  declare -A is_changed=()
  while IFS= read -r f; do
    [ -n "$f" ] && is_changed["$f"]=1
  done < <(git diff --name-only --diff-filter=d "$base" --; git ls-files --others --exclude-standard)
fi
# Keeps the arguments that are to be checked.
selected() {
  for f in "$@"; do
    if [ "$changed" = 0 ] || [ -n "${is_changed[$f]:-}" ]; then echo "$f"; fi
  done
}

# ---- C++ formatting ------------------------------------------------------
cpp_files=()
while IFS= read -r f; do
  [ -z "$f" ] || [ "$f" = src/RcppExports.cpp ] || cpp_files+=("$f")
done < <(selected inst/include/circuitbreaker/*.hpp inst/include/circuitbreaker/*/*.hpp src/*.cpp src/*.h tests/cpp/*.cpp tests/cpp/*.hpp bench/cpp/*.cpp)

# clang-format-14, or a clang-format of version 14 (other versions format
# differently); CB_CLANG_FORMAT may name another binary.
clang_format=""
for candidate in "${CB_CLANG_FORMAT:-clang-format-14}" clang-format; do
  if command -v "$candidate" >/dev/null && "$candidate" --version | grep -q 'version 14\.'; then
    clang_format=$candidate
    break
  fi
done

if [ ! -f .clang-format ]; then
  summary+=("C++ formatting: not checked (no .clang-format at the top of the repository)")
elif [ -z "$clang_format" ]; then
  if [ "${CB_LINT_STRICT:-0}" = 1 ]; then
    summary+=("C++ formatting: FAILED: clang-format-14 is not installed (bash tools/setup.sh installs it)")
    status=1
  else
    summary+=("C++ formatting: SKIPPED: clang-format-14 is not installed (bash tools/setup.sh installs it)")
  fi
else
  if [ "$fix" = 1 ] && [ "${#cpp_files[@]}" -gt 0 ]; then
    "$clang_format" -i "${cpp_files[@]}"
  fi
  unformatted=()
  for f in "${cpp_files[@]}"; do
    "$clang_format" --dry-run --Werror "$f" 2>&1 | head -n 20
    [ "${PIPESTATUS[0]}" = 0 ] || unformatted+=("$f")
  done
  if [ "${#cpp_files[@]}" = 0 ]; then
    summary+=("C++ formatting: no C++ file to check")
  elif [ "${#unformatted[@]}" -gt 0 ]; then
    summary+=("C++ formatting: ${#unformatted[@]} of ${#cpp_files[@]} files need formatting (bash tools/lint.sh --fix): ${unformatted[*]}")
    status=1
  else
    summary+=("C++ formatting: ${#cpp_files[@]} files OK ($clang_format)")
  fi
fi

# ---- R lints -------------------------------------------------------------
package_files=()
while IFS= read -r f; do
  [ -z "$f" ] || [ "$f" = R/RcppExports.R ] || package_files+=("$f")
done < <(selected R/*.R bench/*.R bench/*/*.R inst/redis/*.R tools/*.R)
test_files=()
while IFS= read -r f; do
  [ -z "$f" ] || test_files+=("$f")
done < <(selected tests/testthat/*.R)

if [ $(( ${#package_files[@]} + ${#test_files[@]} )) = 0 ]; then
  summary+=("R lints: no R file to check")
elif ! Rscript --vanilla -e 'quit(status = !requireNamespace("lintr", quietly = TRUE))' >/dev/null 2>&1; then
  summary+=("R lints: FAILED: lintr is not installed (bash tools/setup.sh installs it)")
  status=1
else
  r_out=$(mktemp)
  Rscript --vanilla - "${#package_files[@]}" "${package_files[@]}" "${test_files[@]}" >"$r_out" <<'EOF'
args <- commandArgs(TRUE)
n_package <- as.integer(args[[1]])
files <- args[-1]
package_files <- utils::head(files, n_package)
test_files <- utils::tail(files, length(files) - n_package)
suppressPackageStartupMessages(library(lintr))

lint_files <- function(files) {
  lints <- unlist(lapply(files, function(f) unclass(lintr::lint(f, cache = FALSE))), recursive = FALSE)
  structure(if (is.null(lints)) list() else lints, class = "lints")
}
bench_files <- package_files[startsWith(package_files, "bench/")]
redis_files <- package_files[startsWith(package_files, "inst/redis/")]
found <- lint_files(setdiff(package_files, c(bench_files, redis_files)))
# inst/redis/ as it is used: its files sourced together (the topologies
# call redis_server_start() and redis_cli() of the others).
redis_shared <- list.files("inst/redis", "\\.R$", full.names = TRUE)
if (length(redis_files)) {
  redis_env <- attach(NULL, name = "circuitbreaker:inst-redis")
  for (f in redis_shared) sys.source(f, envir = redis_env, keep.source = FALSE)
  found <- structure(c(unclass(found), unclass(lint_files(redis_files))), class = "lints")
  detach("circuitbreaker:inst-redis")
}
# The benchmarks as they run: what they source from bench/harness/ attached
# (with source(), not sys.source(): bench/harness/redis.R and redis-tls.R
# find the files of inst/redis/ they load from their own path, which only
# source() gives them). A file that cannot be loaded fails the lint: its
# helpers would be reported as undefined in every benchmark.
if (length(bench_files)) {
  harness <- attach(NULL, name = "circuitbreaker:bench-harness")
  shared <- list.files("bench/harness", "\\.R$", full.names = TRUE)
  # redis-tls.R needs redis.R's redis_server_start(): redis.R first.
  shared <- c(shared[basename(shared) == "redis.R"], shared[basename(shared) != "redis.R"])
  for (f in shared) {
    tryCatch(source(f, local = as.environment(harness), keep.source = FALSE),
             error = function(e) {
               message("lint: could not load ", f, ": ", conditionMessage(e))
               quit(status = 1)
             })
  }
  found <- structure(c(unclass(found), unclass(lint_files(bench_files))), class = "lints")
  detach("circuitbreaker:bench-harness")
}
# The tests as testthat sees them: testthat attached, the helpers loaded.
if (length(test_files)) {
  suppressPackageStartupMessages(library(testthat))
  helpers <- attach(NULL, name = "circuitbreaker:test-helpers")
  # helper-redis.R's redis_server_start() and helper-redis-topologies.R's
  # functions, which they take from the installed package (whichever version
  # lintr runs with), from this tree.
  for (f in redis_shared) sys.source(f, envir = helpers, keep.source = FALSE)
  for (f in list.files("tests/testthat", "^helper.*\\.[Rr]$", full.names = TRUE)) {
    tryCatch(sys.source(f, envir = helpers, keep.source = FALSE),
             error = function(e) message("lint: could not load ", f, ": ", conditionMessage(e)))
  }
  found <- structure(c(unclass(found), unclass(lint_files(test_files))), class = "lints")
}
if (length(found)) print(found)
linters <- vapply(found, function(l) l$linter, character(1))
by_linter <- sort(table(linters), decreasing = TRUE)
files_hit <- length(unique(vapply(found, function(l) l$filename, character(1))))
cat(sprintf("RESULT %d %d %d %s\n", length(found), files_hit, length(files),
            paste(sprintf("%s %d", names(by_linter), by_linter), collapse = ", ")))
EOF
  r_status=$?
  grep -v '^RESULT ' "$r_out"
  result=$(grep '^RESULT ' "$r_out" | tail -n1)
  rm -f "$r_out"
  if [ "$r_status" != 0 ] || [ -z "$result" ]; then
    summary+=("R lints: FAILED: lintr did not run to the end (status $r_status)")
    status=1
  else
    read -r _ n_lints n_hit n_files by_linter <<<"$result"
    if [ "$n_lints" = 0 ]; then
      summary+=("R lints: $n_files files OK")
    else
      summary+=("R lints: $n_lints lints in $n_hit of $n_files files ($by_linter)")
      status=1
    fi
  fi
fi

echo
echo "lint summary:"
printf '  %s\n' "${summary[@]}"
if [ "$status" = 0 ]; then echo "lint: OK"; else echo "lint: FAILED"; fi
exit "$status"
