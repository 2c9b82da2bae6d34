# breaker_prometheus(): the Prometheus text exposition format.

# The sample lines of `text` for `metric` (without HELP and TYPE).
samples_of <- function(text, metric) {
  lines <- strsplit(text, "\n", fixed = TRUE)[[1]]
  lines[startsWith(lines, paste0(metric, "{"))]
}

# A breaker with every kind of outcome, on a manual clock: one ignored error,
# one released call, two successes (one slow), three failures (which open
# it) and one rejected call.
busy_breaker <- function(name = NULL) {
  clock <- breaker_manual_clock()
  cb <- circuit_breaker(failure_threshold = 3, recovery_timeout = 30, slow_call_duration = 1,
                        ignore = "test_ignored", clock = clock, name = name)
  ignored <- structure(class = c("test_ignored", "error", "condition"),
                       list(message = "ignored", call = NULL))
  expect_error(cb$execute(function() stop(ignored), function() NULL), class = "test_ignored")
  # An outer handler that takes over a warning abandons the call: released.
  tryCatch(cb$execute(function() warning("abandoned")), warning = function(w) NULL)
  cb$execute(function() {
    clock$advance(2)
    "slow"
  })
  cb$execute(function() "fast")
  for (i in 1:3) cb$execute(function() stop("down"), function() NULL)
  expect_equal(cb$execute(function() "not called", function() "fallback"), "fallback")
  cb
}

test_that("counters, gauges and states have the breaker's values", {
  cb <- busy_breaker()
  text <- breaker_prometheus(cb)
  expect_true(endsWith(text, "\n"))
  expect_equal(samples_of(text, "circuitbreaker_calls_total"), c(
    'circuitbreaker_calls_total{breaker="unnamed-1",outcome="success"} 2',
    'circuitbreaker_calls_total{breaker="unnamed-1",outcome="failure"} 3',
    'circuitbreaker_calls_total{breaker="unnamed-1",outcome="ignored"} 1',
    'circuitbreaker_calls_total{breaker="unnamed-1",outcome="rejected"} 1',
    'circuitbreaker_calls_total{breaker="unnamed-1",outcome="full"} 0',
    'circuitbreaker_calls_total{breaker="unnamed-1",outcome="released"} 1'
  ))
  expect_equal(samples_of(text, "circuitbreaker_slow_calls_total"),
               'circuitbreaker_slow_calls_total{breaker="unnamed-1"} 1')
  expect_equal(samples_of(text, "circuitbreaker_opened_total"),
               'circuitbreaker_opened_total{breaker="unnamed-1"} 1')
  expect_equal(samples_of(text, "circuitbreaker_state"), c(
    'circuitbreaker_state{breaker="unnamed-1",state="CLOSED"} 0',
    'circuitbreaker_state{breaker="unnamed-1",state="OPEN"} 1',
    'circuitbreaker_state{breaker="unnamed-1",state="HALF_OPEN"} 0',
    'circuitbreaker_state{breaker="unnamed-1",state="FORCED_OPEN"} 0',
    'circuitbreaker_state{breaker="unnamed-1",state="DISABLED"} 0'
  ))
  expect_equal(samples_of(text, "circuitbreaker_failure_rate"),
               'circuitbreaker_failure_rate{breaker="unnamed-1"} 0.6')
  expect_equal(samples_of(text, "circuitbreaker_slow_call_rate"),
               'circuitbreaker_slow_call_rate{breaker="unnamed-1"} 0.2')
  expect_equal(samples_of(text, "circuitbreaker_window_calls"),
               'circuitbreaker_window_calls{breaker="unnamed-1"} 5')
  expect_equal(samples_of(text, "circuitbreaker_seconds_until_probe"),
               'circuitbreaker_seconds_until_probe{breaker="unnamed-1"} 30')
  expect_equal(samples_of(text, "circuitbreaker_consecutive_failures"),
               'circuitbreaker_consecutive_failures{breaker="unnamed-1"} 3')
  expect_promtool_ok(text)
})

test_that("every metric family has HELP and TYPE lines, in one group", {
  text <- breaker_prometheus(list(busy_breaker(), circuit_breaker()))
  lines <- strsplit(text, "\n", fixed = TRUE)[[1]]
  types <- c(
    circuitbreaker_info = "gauge", circuitbreaker_state = "gauge", circuitbreaker_failure_rate = "gauge",
    circuitbreaker_slow_call_rate = "gauge", circuitbreaker_window_calls = "gauge",
    circuitbreaker_seconds_until_probe = "gauge", circuitbreaker_consecutive_failures = "gauge",
    circuitbreaker_in_flight = "gauge", circuitbreaker_max_concurrent = "gauge",
    circuitbreaker_calls_total = "counter", circuitbreaker_slow_calls_total = "counter",
    circuitbreaker_opened_total = "counter", circuitbreaker_health_checks_total = "counter"
  )
  expect_setequal(sub("^# TYPE (\\S+) .*$", "\\1", grep("^# TYPE ", lines, value = TRUE)), names(types))
  for (metric in names(types)) {
    expect_equal(sum(startsWith(lines, paste0("# HELP ", metric, " "))), 1L)
    expect_true(paste0("# TYPE ", metric, " ", types[[metric]]) %in% lines)
  }
  # Samples of a family follow its TYPE line without interruption.
  family <- sub("[{ ].*$", "", ifelse(startsWith(lines, "#"), sub("^# \\S+ ", "", lines), lines))
  expect_equal(sum(family[-1] != family[-length(family)]), length(types) - 1L)
  expect_true(all(startsWith(family, "circuitbreaker_")))
})

test_that("breaker names are escaped in labels (backslash, double quote, newline)", {
  name <- "say \"hi\"\\path\nnext"
  cb <- local_breaker(name = name)
  cb$execute(function() "ok")
  text <- breaker_prometheus(cb)
  expect_true('circuitbreaker_calls_total{breaker="say \\"hi\\"\\\\path\\nnext",outcome="success"} 1' %in%
                strsplit(text, "\n", fixed = TRUE)[[1]])
  # The raw newline never reaches the output: one line per sample.
  expect_length(samples_of(text, "circuitbreaker_state"), 5L)
  expect_promtool_ok(text)

  # And from the registry.
  expect_match(breaker_prometheus(), 'breaker="say \\"hi\\"\\\\path\\nnext"', fixed = TRUE)
})

test_that("non-ASCII names are written in UTF-8", {
  name <- "caf\u00e9-\u00fcber"
  cb <- local_breaker(name = name)
  text <- breaker_prometheus(cb)
  expect_true(validUTF8(text))
  expect_match(text, paste0('breaker="', name, '"'), fixed = TRUE)
  expect_promtool_ok(text)
})

test_that("empty windows give NaN rates and a forced-open breaker +Inf", {
  cb <- circuit_breaker()
  cb$force_open()
  text <- breaker_prometheus(cb)
  expect_equal(samples_of(text, "circuitbreaker_failure_rate"),
               'circuitbreaker_failure_rate{breaker="unnamed-1"} NaN')
  expect_equal(samples_of(text, "circuitbreaker_slow_call_rate"),
               'circuitbreaker_slow_call_rate{breaker="unnamed-1"} NaN')
  expect_equal(samples_of(text, "circuitbreaker_seconds_until_probe"),
               'circuitbreaker_seconds_until_probe{breaker="unnamed-1"} +Inf')
  expect_true('circuitbreaker_state{breaker="unnamed-1",state="FORCED_OPEN"} 1' %in%
                samples_of(text, "circuitbreaker_state"))
  expect_promtool_ok(text)
})

test_that("unnamed breakers are numbered in the order given; named ones keep their name", {
  named <- local_breaker(name = "prometheus-test-named")
  text <- breaker_prometheus(list(circuit_breaker(), named, circuit_breaker()))
  labels <- sub('^circuitbreaker_opened_total\\{breaker="(.*)"\\} .*$', "\\1",
                samples_of(text, "circuitbreaker_opened_total"))
  expect_equal(labels, c("unnamed-1", "prometheus-test-named", "unnamed-2"))
  expect_promtool_ok(text)
})

test_that("by default every registered breaker is described, and only those", {
  a <- local_breaker(name = "prometheus-test-a")
  b <- local_breaker(name = "prometheus-test-b", failure_threshold = 1)
  b$execute(function() stop("down"), function() NULL)
  unregistered <- circuit_breaker()
  text <- breaker_prometheus()
  opened <- samples_of(text, "circuitbreaker_opened_total")
  expect_true('circuitbreaker_opened_total{breaker="prometheus-test-a"} 0' %in% opened)
  expect_true('circuitbreaker_opened_total{breaker="prometheus-test-b"} 1' %in% opened)
  expect_false(any(grepl("unnamed", text)))
  expect_equal(length(opened), nrow(breaker_list()))
  expect_promtool_ok(text)
})

test_that("no breakers: HELP and TYPE lines only, still valid", {
  text <- breaker_prometheus(list())
  lines <- strsplit(text, "\n", fixed = TRUE)[[1]]
  expect_true(all(startsWith(lines, "# ")))
  expect_length(lines, 26L)
  expect_promtool_ok(text)
})

test_that("bad arguments are classed errors", {
  expect_error(breaker_prometheus("inventory"), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_prometheus(list(circuit_breaker(), "x")), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_prometheus(breaker_list()), class = "circuit_breaker_invalid_argument")
  dup <- local_breaker(name = "prometheus-test-dup")
  expect_error(breaker_prometheus(list(dup, dup)), class = "circuit_breaker_invalid_argument")
})

test_that("the promtool check is not vacuous", {
  skip_if(!nzchar(Sys.which("promtool")), "promtool (Prometheus) is not installed")
  # A bad escape, and a gauge with the `_count` suffix reserved for
  # histograms and summaries (why the consecutive-failures gauge is not
  # called circuitbreaker_failure_count).
  expect_failure(expect_promtool_ok('circuitbreaker_x{breaker="a\\q"} 1\n'))
  expect_failure(expect_promtool_ok(paste0(
    "# HELP circuitbreaker_failure_count Consecutive failures.\n",
    "# TYPE circuitbreaker_failure_count gauge\n",
    'circuitbreaker_failure_count{breaker="a"} 1\n'
  )))
})

test_that("a bulkhead's permits in flight, its limit and its full rejections are exported", {
  cb <- circuit_breaker(max_concurrent = 1)
  text <- cb$execute(function() {
    cb$execute(function() "not called", function() "full")
    breaker_prometheus(cb)
  })
  expect_equal(samples_of(text, "circuitbreaker_in_flight"), 'circuitbreaker_in_flight{breaker="unnamed-1"} 1')
  expect_equal(samples_of(text, "circuitbreaker_max_concurrent"),
               'circuitbreaker_max_concurrent{breaker="unnamed-1"} 1')
  expect_true('circuitbreaker_calls_total{breaker="unnamed-1",outcome="full"} 1' %in%
                samples_of(text, "circuitbreaker_calls_total"))
  expect_equal(samples_of(breaker_prometheus(circuit_breaker()), "circuitbreaker_max_concurrent"),
               'circuitbreaker_max_concurrent{breaker="unnamed-1"} +Inf')
  expect_promtool_ok(text)
})
