# Helpers for test-store-host-security.R: a throwaway unprivileged user (the
# "attacker", another local user of the host) who plants files in a store
# directory, and store directories made like /dev/shm.

# This process's effective uid, as a string.
effective_uid <- function() {
  system2("id", "-u", stdout = TRUE)
}

# A new system user with no home and no shell, removed when `env` ends:
# list(name, uid, gid). Skips when this is not root on Linux, or when
# useradd or setpriv is missing.
local_attacker <- function(env = parent.frame()) {
  skip_if_not(circuitbreaker:::cb_host_supported(), "host-shared breakers need Linux")
  skip_if_not(identical(Sys.info()[["effective_user"]], "root"),
              "planting files as another user needs root (to create a throwaway user)")
  tools <- c("useradd", "userdel", "setpriv")
  missing <- tools[!nzchar(Sys.which(tools))]
  skip_if(length(missing) > 0, paste("not installed:", paste(missing, collapse = ", ")))
  name <- paste0("cbtest", paste(sample(c(letters, 0:9), 8, replace = TRUE), collapse = ""))
  made <- system2("useradd", c("--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name),
                  stdout = FALSE, stderr = FALSE)
  skip_if(made != 0, "useradd could not create a throwaway user")
  withr::defer(system2("userdel", name, stdout = FALSE, stderr = FALSE), envir = env)
  list(name = name,
       uid = system2("id", c("-u", name), stdout = TRUE),
       gid = system2("id", c("-g", name), stdout = TRUE))
}

# Runs the shell command `cmd` as `attacker` (no supplementary groups);
# fails the test unless it succeeds.
as_attacker <- function(attacker, cmd) {
  status <- system2("setpriv", c("--reuid", attacker$uid, "--regid", attacker$gid, "--clear-groups",
                                 "--", "sh", "-c", shQuote(cmd)),
                    stdout = FALSE, stderr = FALSE)
  expect_identical(status, 0L, label = paste("as the attacker:", cmd))
  invisible(status)
}

# A directory made like /dev/shm (mode 1777: everybody may create files,
# only their owners may remove them), removed with everything in it when
# `env` ends.
local_shared_directory <- function(env = parent.frame()) {
  root <- if (dir.exists("/dev/shm")) "/dev/shm" else tempdir()
  dir <- tempfile("cb-test-shared-", tmpdir = root)
  dir.create(dir)
  Sys.chmod(dir, "1777", use_umask = FALSE)
  withr::defer(unlink(dir, recursive = TRUE), envir = env)
  dir
}

# The default store directory of this user, removed when `env` ends if it
# did not exist before (with the segments a test left in it); `existed`
# tells whether it was there already. An empty one (a real directory, left by
# an earlier breaker_store_host() call of this run or of another program)
# holds no breaker: it is removed first, so that the tests that need the
# name free run rather than skip.
local_default_store_directory <- function(env = parent.frame()) {
  dir <- file.path("/dev/shm", paste0("circuitbreaker-", effective_uid()))
  link <- Sys.readlink(dir)  # NA when missing, "" when not a link
  if (identical(link, "") && dir.exists(dir) &&
        length(list.files(dir, all.files = TRUE, no.. = TRUE)) == 0L) {
    file.remove(dir)  # remove(3): an empty directory only
    link <- Sys.readlink(dir)
  }
  existed <- file.exists(dir) || (!is.na(link) && nzchar(link))
  if (!existed) {
    withr::defer(unlink(dir, recursive = TRUE), envir = env)
  }
  list(path = dir, existed = existed)
}

# The error of `expr`, which must be a circuit_breaker_store_untrusted.
expect_untrusted <- function(expr) {
  err <- expect_error(expr, class = "circuit_breaker_store_untrusted")
  expect_s3_class(err, "circuit_breaker_store_error")
  expect_s3_class(err, "circuit_breaker_error")
  invisible(err)
}
