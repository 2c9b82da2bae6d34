# The one launcher of child R processes that share a breaker (or a store)
# with the test: shared_child() (host store), fleet_child(), cluster_child()
# and sentinel_child() (fleet store) say which store; this starts it.

# Runs `body(x, extra)` in a new R process, in the background, and returns
# the callr process. There `store` (the name of an exported store function,
# such as "breaker_store_host") is called with `store_args`; `x` is that
# store's breaker `name`, made with `args`, or the store itself when `name`
# is NULL. `body` must be self-contained (its environment is replaced by the
# global one). `env`: environment variables for the child.
store_child <- function(store, store_args, name, args, body, extra = list(), env = character()) {
  environment(body) <- globalenv()
  callr::r_bg(
    function(store, store_args, name, args, body, extra) {
      library(circuitbreaker)
      s <- do.call(getExportedValue("circuitbreaker", store), store_args)
      if (is.null(name)) return(body(s, extra))
      cb <- do.call(circuit_breaker, c(args, list(name = name, store = s)))
      body(cb, extra)
    },
    list(store = store, store_args = store_args, name = name, args = args, body = body, extra = extra),
    libpath = .libPaths(), supervise = TRUE, env = c(callr::rcmd_safe_env(), env)
  )
}
