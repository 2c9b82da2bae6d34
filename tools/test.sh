#!/usr/bin/env bash
# Runs every test: the C++ core's Catch2 suite (built outside R) and the R
# package's testthat suite (against the installed package). Installs what is
# missing first. Prints one closing line: "total: N passed, N failed".
#
#   bash tools/test.sh           lane 1: Debian's R packages (the oldest versions
#                                we support), and the C++ suite
#   bash tools/test.sh --lane2   lane 2: the testthat suite against the current
#                                CRAN releases (built once into a kept library,
#                                see tools/setup.sh); the C++ suite does not
#                                depend on R packages and runs in lane 1
set -euo pipefail
cd "$(dirname "$0")/.."
lane=1
for arg in "$@"; do
  case "$arg" in
    --lane2) lane=2 ;;
    *) echo "usage: bash tools/test.sh [--lane2]" >&2; exit 2 ;;
  esac
done

if [ "$lane" = 2 ]; then
  setup_log=$(mktemp)
  bash tools/setup.sh --lane2 | tee "$setup_log"
  R_LIBS=$(grep '^lane2-libs: ' "$setup_log" | tail -n1 | cut -d' ' -f2)
  rm -f "$setup_log"
  [ -n "$R_LIBS" ] || { echo "test: lane 2's libraries are unknown" >&2; exit 1; }
  export R_LIBS
  echo "== lane 2: R_LIBS=$R_LIBS =="
else
  bash tools/setup.sh
fi

cpp_status=0; cpp_passed=0; cpp_failed=0
if [ "$lane" = 1 ]; then
  echo "== C++ core: Catch2 =="
  cpp_log=$(mktemp)
  set +e
  make -s -C tests/cpp test 2>&1 | tee "$cpp_log"
  cpp_status=${PIPESTATUS[0]}
  set -e
  # Catch2 v2 closes with "All tests passed (N assertions in M test cases)" or
  # "test cases: ... | N passed | N failed" and "assertions: ...".
  cpp_passed=$(grep -Eo 'All tests passed \([0-9]+ assertion' "$cpp_log" | grep -Eo '[0-9]+' | tail -n1 || true)
  cpp_failed=0
  if [ -z "$cpp_passed" ]; then
    cpp_passed=$(grep -E '^assertions:' "$cpp_log" | grep -Eo '[0-9]+ passed' | grep -Eo '[0-9]+' | tail -n1 || echo 0)
    cpp_failed=$(grep -E '^assertions:' "$cpp_log" | grep -Eo '[0-9]+ failed' | grep -Eo '[0-9]+' | tail -n1 || echo 1)
  fi
  rm -f "$cpp_log"
fi

echo "== R package: testthat (lane $lane) =="
# testthat's output goes straight to this script's stdout and stderr (no tee to
# /dev/stderr: a second open of a log file that both point to has its own
# offset, and the closing lines below then overwrite testthat's first lines);
# the counts come back through a file.
r_counts_file=$(mktemp)
set +e
# PROCESSX_NOTIFY_OLD_SIGCHLD: see tests/testthat.R (a passing run otherwise
# ends with parallel's "Error while shutting down" and a 10 s wait).
NOT_CRAN=true PROCESSX_NOTIFY_OLD_SIGCHLD=true CB_TEST_COUNTS="$r_counts_file" Rscript --vanilla -e '
  # The counts of the reporter that prints testthat'"'"'s own summary line
  # ([ FAIL | WARN | SKIP | PASS ]), so that ours equal it: the results data
  # frame has one "skipped" flag per test and no row for a skip outside
  # test_that().
  reporter <- testthat::ProgressReporter$new()
  testthat::test_dir("tests/testthat", package = "circuitbreaker", load_package = "installed",
                     reporter = reporter, stop_on_failure = FALSE)
  writeLines(paste(reporter$n_ok, reporter$n_fail, reporter$n_skip), Sys.getenv("CB_TEST_COUNTS"))'
set -e
read -r r_passed r_failed r_skipped < "$r_counts_file" || true
rm -f "$r_counts_file"
r_passed=${r_passed:-0}; r_failed=${r_failed:-1}; r_skipped=${r_skipped:-0}

passed=$((cpp_passed + r_passed))
failed=$((cpp_failed + r_failed))
if [ "$lane" = 1 ]; then
  echo "lane 1: C++: ${cpp_passed} assertions passed, ${cpp_failed} failed; R: ${r_passed} expectations passed, ${r_failed} failed, ${r_skipped} skipped"
else
  # Lane 2 runs the testthat suite alone (the C++ suite runs in lane 1).
  echo "lane 2: R: ${r_passed} expectations passed, ${r_failed} failed, ${r_skipped} skipped"
fi
echo "total: ${passed} passed, ${failed} failed, ${r_skipped} skipped"
if [ "$cpp_status" != 0 ] || [ "$failed" != 0 ]; then exit 1; fi
