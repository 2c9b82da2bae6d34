# What every store says about its breakers, asked the same way for each
# store (R/store.R): print()'s label, the dashboard's badge (test-shiny.R),
# breaker_list(), Prometheus and the status objects.

test_that("print() labels a breaker by its store: none for the process store, host-shared, fleet-shared and the mode", {
  host <- local_host_store()
  server <- local_redis_server(password = "label-PW-secret")
  fleet <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.5)
  own <- local_breaker(name = "label-process", store = breaker_store_process())
  on_host <- local_shared_breaker(host, "label-host", host_args())
  on_fleet <- local_shared_breaker(fleet, "label-fleet", fleet_args())
  expect_true(wait_until(function() identical(on_fleet$metrics()$mode, "fleet")))
  expect_identical(format(own)[[1]], "<CircuitBreaker> label-process: CLOSED")
  expect_identical(format(on_host)[[1]], "<CircuitBreaker> label-host (host-shared): CLOSED")
  expect_identical(format(on_fleet)[[1]], "<CircuitBreaker> label-fleet (fleet-shared, fleet): CLOSED")
  expect_false(any(grepl("label-PW-secret", c(format(on_fleet), format(fleet)), fixed = TRUE)))
  expect_identical(format(breaker_store_process()), "<circuit_breaker_store: process>")
  expect_identical(format(host), paste0("<circuit_breaker_store: host, ", host$path, ">"))
  expect_match(format(fleet)[[1]], "^<circuit_breaker_store: redis, redis://:\\*\\*\\*@127\\.0\\.0\\.1:")

  # One list of the three: every row has every store's fields, NA where a
  # store has none; each status object shows them too, and Prometheus has
  # the fleet's families for the fleet breaker only.
  listed <- breaker_list()
  listed <- listed[listed$name %in% c("label-process", "label-host", "label-fleet"), ]
  expect_identical(listed$store, c("redis", "host", "process"))
  expect_identical(listed$mode, c("fleet", NA, NA))
  statuses <- circuitbreaker:::web_statuses()
  statuses <- statuses[vapply(statuses, function(s) s$name %in% listed$name, logical(1))]
  expect_true(all(vapply(statuses, function(s) all(c("mode", "sync_lag", "last_error") %in% names(s)), logical(1))))
  expect_false("mode" %in% names(circuitbreaker:::web_status(own$metrics())))
  prom <- breaker_prometheus(list(own, on_host, on_fleet))
  expect_match(prom, 'circuitbreaker_fleet_mode{breaker="label-fleet",mode="fleet"} 1', fixed = TRUE)
  expect_false(grepl('circuitbreaker_fleet_mode{breaker="label-host"', prom, fixed = TRUE))
  expect_false(grepl('circuitbreaker_fleet_mode{breaker="label-process"', prom, fixed = TRUE))
  expect_false(grepl("circuitbreaker_fleet_", breaker_prometheus(list(own, on_host)), fixed = TRUE))
})

test_that("a store given to breaker_for() replaces the store of circuitbreaker.defaults whole", {
  host <- local_host_store()
  server <- local_redis_server()
  fleet <- breaker_store_redis(server$url, timeout = 0.5)
  withr::local_options(circuitbreaker.defaults = list(store = fleet, failure_threshold = 2))
  on_host <- local_breaker_for("http://127.0.0.1:11/x", store = host)
  expect_identical(on_host$metrics()$store, "host")
  expect_output(print(on_host), "127.0.0.1:11 (host-shared)", fixed = TRUE)
  own <- local_breaker_for("http://127.0.0.1:12/x", store = breaker_store_process())
  expect_identical(own$metrics()$store, "process")
  expect_identical(own$failure_threshold, 2)
  breaker_store_unlink("127.0.0.1:11", host)
})
