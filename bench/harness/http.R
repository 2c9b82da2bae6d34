# HTTP from the benchmarks' driving process to their servers on 127.0.0.1.

# A handle for one request: a fresh connection, `Connection: close` (httpuv,
# under plumber, stalls keep-alive clients by about 40 ms per request).
request_handle <- function(timeout) {
  handle <- curl::new_handle(timeout_ms = max(1, round(timeout * 1000)), forbid_reuse = TRUE)
  curl::handle_setheaders(handle, Connection = "close")
}

# GET `url` and decode its JSON answer; an answer other than HTTP 200 goes
# to `fail(message)` (by default an error).
get_json <- function(url, timeout = 10, fail = stop) {
  response <- curl::curl_fetch_memory(url, handle = request_handle(timeout))
  if (response$status_code != 200) fail(paste0(url, " answered HTTP ", response$status_code, "."))
  jsonlite::fromJSON(rawToChar(response$content), simplifyVector = TRUE)
}
