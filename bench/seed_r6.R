# A plain R6 circuit breaker with the rules of the original R6 class (the "seed"), written for this
# benchmark as the baseline "what users had before": state in R fields,
# Sys.time() arithmetic, tryCatch() around the request.
SeedBreaker <- R6::R6Class("SeedBreaker",
  public = list(
    failure_threshold = 5,
    recovery_timeout = 30,
    failure_count = 0,
    state = "CLOSED",
    last_failure_time = NULL,
    initialize = function(failure_threshold = 5, recovery_timeout = 30) {
      self$failure_threshold <- failure_threshold
      self$recovery_timeout <- recovery_timeout
    },
    execute = function(request_func, fallback_func) {
      if (self$state == "OPEN") {
        waited <- as.numeric(Sys.time() - self$last_failure_time, units = "secs")
        if (is.null(self$last_failure_time) || waited <= self$recovery_timeout) {
          return(fallback_func())
        }
        self$state <- "HALF_OPEN"
      }
      tryCatch(
        {
          value <- request_func()
          self$on_success()
          value
        },
        error = function(e) {
          self$on_failure()
          fallback_func()
        }
      )
    },
    on_success = function() {
      self$failure_count <- 0
      self$state <- "CLOSED"
    },
    on_failure = function() {
      self$failure_count <- self$failure_count + 1
      self$last_failure_time <- Sys.time()
      if (self$failure_count >= self$failure_threshold) self$state <- "OPEN"
    }
  )
)
