#!/usr/bin/env bash
# Runs the R tests that exercise the C++ binding under valgrind's memcheck,
# against the installed package, and fails on memory errors or leaks
# attributable to the package (a stack frame in circuitbreaker.so).
#
#   bash tools/valgrind.sh                 (from anywhere; a few minutes)
#
# Two runs of R under
#   valgrind --tool=memcheck --leak-check=full --error-exitcode=1
#            [--suppressions=tools/valgrind.supp]
# 1. testthat: every file of tests/testthat except those whose names contain
#    "http", "demo", "plumber", "shiny", "async" (they start servers or R
#    processes) or "avalanche" (it starts plumber and webfakes processes
#    too), and except test-arguments.R and test-bad-input.R: thousands of
#    bad-argument checks (each R error costs about 25 ms natively), about 45 s
#    together natively but far too long under valgrind, and almost all of it
#    R-level validation. CB_VALGRIND_ARGUMENTS=1 runs them as well.
# 2. In its place, a reduced bad-input sweep (written below): every argument
#    of circuit_breaker(), CircuitBreaker$new() and $configure() with a few
#    bad values each, execute() / on() / off() / the manual clock with bad
#    input, the internal entry points with bad pointers, forged permits and
#    bad arguments, restored (serialized) breakers, and a thousand breakers
#    created and garbage-collected (their finalizers must free the C++
#    object: a missed one shows up as "definitely lost").
#
# Each R process writes its own log (OUT/<run>-<pid>.log). An error or leak
# record counts against the package when one of its frames is in
# circuitbreaker.so; the others are R's (or another package's) and are only
# listed. The script fails when the package has any error or any definitely
# or possibly lost block, when a run does not finish (a crash, or the time
# limit), or when valgrind itself reports errors that no suppression covers
# and CB_VALGRIND_STRICT=1.
#
# Environment:
#   CB_VALGRIND_OUT        where the logs go (default: a new /tmp directory)
#   CB_VALGRIND_TIMEOUT    seconds allowed per run (default 900)
#   CB_VALGRIND_ARGUMENTS  1: also run test-arguments.R (slow)
#   CB_VALGRIND_STRICT     1: fail on errors not attributable to the package too
#   CB_VALGRIND_NATIVE     1: run the same R scripts without valgrind (a quick
#                          check of the scripts themselves; no memory check)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
Rscript --vanilla -e 'invisible(packageVersion("circuitbreaker"))' >/dev/null 2>&1 || {
  echo "the circuitbreaker package is not installed (bash tools/setup.sh)" >&2
  exit 2
}
so=$(Rscript --vanilla -e 'cat(system.file("libs", "circuitbreaker.so", package = "circuitbreaker"))')

out=${CB_VALGRIND_OUT:-$(mktemp -d /tmp/cb-valgrind.XXXXXX)}
mkdir -p "$out"
timeout_s=${CB_VALGRIND_TIMEOUT:-900}

vg_opts="--tool=memcheck --leak-check=full --error-exitcode=1 --num-callers=40"
if [ -f "$root/tools/valgrind.supp" ]; then
  vg_opts="$vg_opts --suppressions=$root/tools/valgrind.supp"
fi

exclude="http|demo|plumber|shiny|async|avalanche"
if [ "${CB_VALGRIND_ARGUMENTS:-0}" != 1 ]; then exclude="$exclude|arguments|bad-input"; fi

# ---------------------------------------------------------------------------
cat >"$out/testthat.R" <<EOF
library(circuitbreaker)
res <- as.data.frame(testthat::test_dir(
  "$root/tests/testthat", package = "circuitbreaker", load_package = "installed",
  filter = "^(?!.*($exclude)).*\$", perl = TRUE,
  stop_on_failure = FALSE, reporter = "summary"))
files <- unique(res\$file)
line <- sprintf("testthat: %d files (%s), %d expectations, %d failed, %d errors, %d skipped",
                length(files), paste(sub("^test-(.*)[.]R\$", "\\\\1", files), collapse = " "),
                sum(res\$nb), sum(res\$failed), sum(res\$error), sum(res\$skipped))
secs <- tapply(res\$real, res\$file, sum)
writeLines(c(line, sprintf("  %-24s %6.1f s", names(secs), secs)), "$out/testthat.result")
EOF

cat >"$out/bad_input.R" <<EOF
# A reduced bad-input sweep of the binding, for valgrind. Every call must
# either succeed or signal an R error: nothing may crash or touch memory it
# does not own.
library(circuitbreaker)
errors <- 0L
calls <- 0L
try_it <- function(expr) {
  calls <<- calls + 1L
  tryCatch({ force(expr); invisible(TRUE) }, error = function(e) { errors <<- errors + 1L; FALSE })
}
# A few bad values of each kind (R errors are slow to build under valgrind:
# test-arguments.R tries twenty values on every argument, natively).
bad <- list(NA, -1, "a")
more_bad <- list(NaN, Inf, list(1))
args <- names(formals(circuit_breaker))
for (arg in setdiff(args, "clock")) {
  for (v in bad) {
    value <- stats::setNames(list(v), arg)
    ctor <- if (match(arg, args) %% 2 == 0) CircuitBreaker\$new else circuit_breaker
    try_it(do.call(ctor, value))
  }
}
cb <- circuit_breaker(failure_threshold = 3, recovery_timeout = 1, slow_call_duration = 0.5,
                      failure_rate_threshold = 0.5, window_size = 10, minimum_calls = 2,
                      half_open_max_calls = 2, half_open_max_wait = 1, backoff_multiplier = 2,
                      jitter = 0.5, ramp_up = 1)
for (arg in setdiff(args, c("clock", "name"))) {
  for (v in more_bad) try_it(do.call(cb\$configure, stats::setNames(list(v), arg)))
}
try_it(cb\$configure(3))
try_it(cb\$configure(colour = "red"))
for (v in c(bad, more_bad[1:2], list(NULL, c(1, 2), function() 1))) {
  try_it(cb\$execute(v, function() "fallback"))
  try_it(cb\$execute(function() 1, v))
  try_it(cb\$on(v, function() NULL))
  try_it(cb\$on("success", v))
  try_it(cb\$off(v))
  try_it(breaker_manual_clock(v))
  try_it(breaker_manual_clock()\$advance(v))
  try_it(circuit_breaker(clock = v))
}
# A breaker on a manual clock driven through every state, with events.
clock <- breaker_manual_clock()
m <- circuit_breaker(failure_threshold = 2, recovery_timeout = 1, half_open_max_calls = 2,
                     half_open_max_wait = 0.5, clock = clock)
id <- m\$on("state_change", function(...) NULL)
for (i in 1:50) {
  try_it(m\$execute(function() stop("down"), function(e) "fb"))
  clock\$advance(0.6)
  try_it(m\$execute(function() i, function(e) "fb"))
  if (i %% 7 == 0) m\$force_open()
  if (i %% 11 == 0) m\$disable()
  if (i %% 5 == 0) m\$reset()
  try_it(m\$metrics())
  try_it(format(m))
  try_it(as.data.frame(m))
}
m\$off(id)
# The internal entry points with bad pointers and arguments.
ns <- asNamespace("circuitbreaker")
ptr <- get("ptr", environment(cb\$execute))
clock_ptr <- NULL
bad_ptrs <- list(NULL, 1, "x", list(), new.env(), ptr)
for (p in bad_ptrs) {
  for (f in c("cb_state", "cb_snapshot", "cb_history", "cb_is_live", "cb_reset",
              "cb_force_open", "cb_disable", "cb_rejection", "cb_arguments",
              "cb_effective_config")) {
    if (exists(f, ns)) try_it(get(f, ns)(p))
  }
  for (a in list(NA, -1, Inf, NaN, 1e300, "a", NULL, 0, 3)) {
    if (exists("cb_transitions", ns)) try_it(ns\$cb_transitions(p, a))
  }
  try_it(ns\$cb_note(p, 5L))
  try_it(ns\$cb_note(p, NA_integer_))
  try_it(ns\$cb_note(p, "x"))
  try_it(ns\$cb_clock_now(p))
  try_it(ns\$cb_clock_advance(p, 1))
}
# Forged permits and outcome codes on the .Call hot path.
for (permit in list(NULL, raw(0), raw(3), as.raw(rep(255, 32)), as.raw(rep(1, 32)),
                    as.raw(0:31), 1, "permit")) {
  for (outcome in list(0L, 1L, 2L, 3L, -1L, NA_integer_, 1, "a")) {
    try_it(.Call(ns\$cb_record, ptr, permit, outcome, -1))
  }
  try_it(.Call(ns\$cb_release, ptr, permit))
}
# Restored (serialized) breakers: a NULL external pointer until first use.
for (k in 1:5) {
  r <- unserialize(serialize(cb, NULL))
  try_it(r\$execute(function() 1))
  try_it(r\$metrics())
  r2 <- unserialize(serialize(cb, NULL))
  try_it(ns\$cb_state(get("ptr", environment(r2\$execute))))
}
# Breakers and clocks made and dropped: the finalizers free them.
for (i in 1:300) {
  b <- circuit_breaker(clock = if (i %% 2 == 0) breaker_manual_clock() else NULL)
  b\$execute(function() 1)
}
rm(b, r, r2)
invisible(gc(full = TRUE))
writeLines(sprintf("bad-input sweep: %d calls, %d of them signalled an R error, none crashed",
                   calls, errors), "$out/bad_input.result")
EOF

# ---------------------------------------------------------------------------
status=0
run() {  # run NAME SCRIPT
  local name=$1 script=$2 rc=0 t0 t1
  echo "== valgrind: $name (logs: $out/$name-*.log) =="
  t0=$(date +%s)
  local debugger=(-d "valgrind $vg_opts --log-file=$out/$name-%p.log")
  if [ "${CB_VALGRIND_NATIVE:-0}" = 1 ]; then debugger=(); fi
  (cd "$out" && NOT_CRAN=true timeout --signal=INT --kill-after=30 "$timeout_s" \
    R "${debugger[@]}" --vanilla --slave -f "$script" >"$out/$name.stdout" 2>&1) || rc=$?
  t1=$(date +%s)
  echo "   R exited with status $rc after $((t1 - t0)) s"
  if [ -f "$out/$name.result" ]; then
    echo "   $(cat "$out/$name.result")"
  else
    echo "   FAILED: the run did not finish (crash, or over ${timeout_s} s); see $out/$name.stdout"
    tail -n 20 "$out/$name.stdout" | sed 's/^/   | /'
    return 1
  fi
}

# Prints the record blocks of a log (without the ==pid== prefix), one block
# per paragraph, and a summary line; counts package-attributable records.
summarise() {  # summarise LOG
  local log=$1
  sed -E 's/^==[0-9]+== ?//' "$log" | awk -v so="circuitbreaker.so" '
    BEGIN { RS = ""; FS = "\n" }
    {
      head = $1
      # A record is a paragraph with a stack trace ("at 0x...", "by 0x...").
      if ($0 !~ /\n *(at|by) 0x[0-9A-Fa-f]+:/) next
      is_leak = head ~ /are (definitely|possibly|indirectly) lost/
      is_error = !is_leak
      if (!is_leak && !is_error) next
      ours = index($0, so) > 0
      if (is_leak) {
        match(head, /^[0-9,]+/); bytes = substr(head, RSTART, RLENGTH); gsub(",", "", bytes)
        kind = head ~ /definitely/ ? "definitely" : (head ~ /possibly/ ? "possibly" : "indirectly")
        leak[kind] += bytes
        if (ours) { pkg_leak[kind] += bytes; pkg_leaks++ }
      } else {
        errors++
        if (ours) pkg_errors++
      }
      if (ours || shown < 3) {
        shown++
        print "   " (ours ? "[package] " : "[not the package] ") head
        n = split($0, lines, "\n")
        for (i = 2; i <= n && i <= 12; i++) print "      " lines[i]
      }
    }
    END {
      printf "   SUMMARY errors=%d package_errors=%d definitely_lost=%d possibly_lost=%d package_lost_records=%d package_definitely_lost=%d package_possibly_lost=%d\n",
             errors, pkg_errors, leak["definitely"], leak["possibly"], pkg_leaks,
             pkg_leak["definitely"], pkg_leak["possibly"]
    }'
}

# The two runs are independent and valgrind runs each on one core: run them
# side by side (their reports are printed in order once both are done).
run testthat "$out/testthat.R" >"$out/testthat.report" 2>&1 &
pid_tests=$!
run bad_input "$out/bad_input.R" >"$out/bad_input.report" 2>&1 &
pid_sweep=$!
wait "$pid_tests" || status=1
wait "$pid_sweep" || status=1
cat "$out/testthat.report" "$out/bad_input.report"
grep -q "FAILED" "$out/testthat.report" "$out/bad_input.report" && status=1

echo "== valgrind: results =="
execed=0
for log in "$out"/testthat-*.log "$out"/bad_input-*.log; do
  [ -f "$log" ] || continue
  # A child that R forked only to exec a program (system(), a shell) is
  # traced until the exec: its log has no summary. Forked R children that
  # run R code (parallel::mclapply) exit under valgrind and are checked.
  if ! grep -q "ERROR SUMMARY" "$log"; then
    execed=$((execed + 1))
    continue
  fi
  parent=$(grep -m1 -Eo 'Parent PID: [0-9]+' "$log" | grep -Eo '[0-9]+' || true)
  forked=0
  if ls "$out"/*-"$parent".log >/dev/null 2>&1; then forked=1; fi
  echo "-- $(basename "$log")$([ "$forked" = 1 ] && echo " (a child forked by R process $parent)")"
  grep -E "ERROR SUMMARY|definitely lost:|indirectly lost:|possibly lost:|in use at exit" "$log" |
    sed -E 's/^==[0-9]+== +/   /' || true
  s=$(summarise "$log")
  printf '%s\n' "$s"
  line=$(printf '%s\n' "$s" | grep 'SUMMARY errors=' || true)
  get() { printf '%s\n' "$line" | grep -Eo "$1=[0-9]+" | cut -d= -f2; }
  if [ "$(get package_errors)" != 0 ] || [ "$(get package_lost_records)" != 0 ]; then
    echo "   FAILED: memory errors or leaks in $so"
    status=1
  elif [ "$(get errors)" != 0 ] && [ "${CB_VALGRIND_STRICT:-0}" = 1 ]; then
    echo "   FAILED (CB_VALGRIND_STRICT=1): valgrind errors outside the package"
    status=1
  fi
  if grep -q "Process terminating" "$log"; then
    if [ "$forked" = 1 ] && grep -q "default action of signal 15 (SIGTERM)" "$log"; then
      # parallel::mclapply() sends SIGTERM to children that have not exited
      # once their results are collected; under valgrind the exit (leak
      # check included) is slow enough to be caught. Not a crash.
      echo "   (terminated by its parent with SIGTERM after returning its result: parallel's clean-up)"
    else
      echo "   FAILED: the process was killed by a signal under valgrind"
      status=1
    fi
  fi
done

echo "($execed more logs are of children that exec'd another program: nothing to check)"
if [ "$status" = 0 ]; then
  echo "valgrind: OK (nothing attributable to circuitbreaker.so); logs in $out"
else
  echo "valgrind: FAILED; logs in $out"
fi
exit "$status"
