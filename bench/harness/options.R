# Command-line options of the benchmark scripts (avalanche/run.R,
# host-shared/run.R, fleet/run.R, async-plumber.R). A script passes its
# `spec` (per option: the environment variable that may give it, whether it
# is a flag, and for a number its bounds) and its own path (whose leading
# comment block is its --help).

usage <- function(status, file) {
  # The comment block at the top of the script.
  lines <- readLines(file, warn = FALSE)
  header <- lines[seq_len(which(!startsWith(lines, "#"))[[1]] - 1L)]
  cat(sub("^# ?", "", header), sep = "\n")
  quit(save = "no", status = status)
}

bad_option <- function(...) {
  cat("run.R: ", ..., "\n", "Try --help.\n", sep = "", file = stderr())
  quit(save = "no", status = 2)
}

# Options from the environment (spec's `env`), then the command line, which
# wins: --name value, --name=value, or --name for a flag.
parse_options <- function(args, spec) {
  values <- list()
  for (name in names(spec)) {
    env <- spec[[name]]$env
    if (!is.na(env) && nzchar(Sys.getenv(env))) values[[name]] <- Sys.getenv(env)
  }
  i <- 1L
  while (i <= length(args)) {
    arg <- args[[i]]
    if (!startsWith(arg, "--")) bad_option("unexpected argument \"", arg, "\"")
    name <- sub("^--", "", sub("=.*$", "", arg))
    if (!name %in% names(spec)) bad_option("unknown option --", name)
    if (grepl("=", arg, fixed = TRUE)) {
      value <- sub("^[^=]*=", "", arg)
    } else if (spec[[name]]$flag) {
      value <- "true"
    } else {
      if (i == length(args)) bad_option("--", name, " needs a value")
      i <- i + 1L
      value <- args[[i]]
    }
    values[[name]] <- value
    i <- i + 1L
  }
  values
}

as_flag <- function(value, name) {
  if (is.null(value)) return(FALSE)
  flag <- switch(tolower(value), "true" = , "1" = , "yes" = TRUE, "false" = , "0" = , "no" = FALSE, NA)
  if (is.na(flag)) bad_option("--", name, " must be true or false, not \"", value, "\"")
  flag
}

# A number option within its spec's bounds (min, max, whole).
as_bounded_number <- function(value, name, spec) {
  s <- spec[[name]]
  number <- suppressWarnings(as.numeric(value))
  kind <- if (s$whole) "a whole number" else "a number"
  if (length(number) != 1L || is.na(number) || number < s$min || number > s$max ||
      (s$whole && number != round(number))) {
    bad_option("--", name, " must be ", kind, " from ", s$min, " to ", s$max, ", not \"", value, "\"")
  }
  number
}
