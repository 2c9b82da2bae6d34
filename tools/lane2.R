# Builds CI's lane 2: the current CRAN releases of the packages circuitbreaker
# calls or tests with, in a library kept between runs (tools/setup.sh --lane2
# runs this). Usage: Rscript --vanilla tools/lane2.R <library>
#
# Why a resolver of our own: install.packages() installs what is missing but
# never upgrades a dependency that is installed and too old (Debian's), and the
# full recursive tree (about 100 packages, 60 compiled) is too slow to build
# cold on 2 cores. So the direct packages are always CRAN's current release,
# and each of their dependencies comes from Debian's library when its version
# satisfies every requirement in the tree, and from CRAN otherwise. A warm run
# (everything current) builds nothing. Prints one line per direct package.

args <- commandArgs(TRUE)
if (length(args) != 1L) stop("usage: Rscript tools/lane2.R <library>")
lib <- args[[1]]
dir.create(lib, recursive = TRUE, showWarnings = FALSE)
lib <- normalizePath(lib)
.libPaths(c(lib, .libPaths()))
Sys.setenv(R_LIBS = paste(.libPaths(), collapse = ":"))

# The packages we call directly (Imports and Suggests, and what the tests,
# vignettes, R CMD check and examples drive), always at CRAN's current release.
direct <- c(
  "Rcpp", "R6", "cli", "rlang", "httr", "httr2", "curl", "promises", "later",
  "httpuv", "plumber", "plumber2", "shiny", "mirai", "nanonext", "otel",
  "otelsdk", "webfakes", "callr", "processx", "testthat", "withr", "jsonlite",
  "bslib", "future", "bench", "knitr", "rmarkdown"
)

repos <- c(CRAN = Sys.getenv("CB_CRAN", "https://cloud.r-project.org"))
# The mirror serves PACKAGES.gz but not PACKAGES.rds: R warns and falls back.
ap <- suppressWarnings(utils::available.packages(repos = repos))
missing_direct <- setdiff(direct, rownames(ap))
if (length(missing_direct)) stop("not on CRAN: ", paste(missing_direct, collapse = ", "))

fields <- c("Depends", "Imports", "LinkingTo")
tree <- unique(c(direct, unlist(tools::package_dependencies(direct, db = ap, which = fields, recursive = TRUE))))
base <- rownames(utils::installed.packages(priority = "base"))
tree <- setdiff(tree, c(base, "R"))

# The version each package in the tree must at least have: the largest ">="
# requirement any member of the tree states for it (CRAN's current DESCRIPTIONs).
floor_of <- list()
for (p in intersect(tree, rownames(ap))) {
  for (f in fields) {
    value <- ap[p, f]
    if (is.na(value)) next
    for (dep in trimws(strsplit(value, ",")[[1]])) {
      m <- regmatches(dep, regexec("^([A-Za-z0-9.]+)\\s*\\(\\s*>=?\\s*([0-9.-]+)\\s*\\)", dep))[[1]]
      if (length(m) != 3L) next
      old <- floor_of[[m[[2]]]]
      if (is.null(old) || package_version(m[[3]]) > package_version(old)) floor_of[[m[[2]]]] <- m[[3]]
    }
  }
}

installed_version <- function(p, libs) {
  for (l in libs) {
    d <- file.path(l, p, "DESCRIPTION")
    if (file.exists(d)) return(package_version(read.dcf(d, "Version")[[1]]))
  }
  NULL
}

# Debian's build of a package (r-cran-<name>), when apt knows one: its version.
debian_version <- function(p) {
  if (!nzchar(Sys.which("apt-cache"))) return(NULL)
  out <- suppressWarnings(system2("apt-cache", c("show", "--no-all-versions", paste0("r-cran-", tolower(p))),
                                  stdout = TRUE, stderr = FALSE))
  v <- grep("^Version: ", out, value = TRUE)
  if (!length(v)) return(NULL)
  v <- sub("[-+~].*$", "", sub("^Version: ([0-9]+:)?", "", v[[1]]))
  tryCatch(package_version(v), error = function(e) NULL)
}

needs_build <- function() {
  out <- character()
  for (p in tree) {
    current <- package_version(ap[p, "Version"])
    have <- installed_version(p, .libPaths())
    if (p %in% direct) {
      if (is.null(have) || have < current) out <- c(out, p)
    } else if (is.null(have) || (!is.null(floor_of[[p]]) && have < package_version(floor_of[[p]]))) {
      out <- c(out, p)
    }
  }
  out
}

# A dependency Debian has in a version new enough comes from apt, in seconds,
# instead of being compiled (vroom, readr, tzdb, bit64, ...).
build <- needs_build()
from_debian <- character()
for (p in setdiff(build, direct)) {
  v <- debian_version(p)
  if (!is.null(v) && (is.null(floor_of[[p]]) || v >= package_version(floor_of[[p]]))) from_debian <- c(from_debian, p)
}
if (length(from_debian)) {
  debs <- paste0("r-cran-", tolower(from_debian))
  cat("lane 2: installing from Debian:", paste(debs, collapse = " "), "\n")
  sudo <- if (identical(Sys.info()[["effective_user"]], "root")) character() else "sudo"
  cmd <- c(sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq",
           "--no-install-recommends", debs)
  status <- system2(cmd[[1]], cmd[-1], stdout = FALSE)
  if (status != 0) cat("lane 2: apt-get failed; building them from CRAN instead\n")
  build <- needs_build()
}

install <- function(pkgs) {
  cat("lane 2: building from CRAN into", lib, ":", paste(pkgs, collapse = " "), "\n")
  withCallingHandlers(
    utils::install.packages(pkgs,
      lib = lib, repos = repos, dependencies = FALSE,
      Ncpus = max(1L, parallel::detectCores()), INSTALL_opts = "--no-docs", quiet = TRUE
    ),
    warning = function(w) {
      # The mirror's missing PACKAGES.rds is not a failure; a failed build is,
      # and is found below by the load check.
      if (grepl("PACKAGES.rds|cannot open URL|had non-zero exit status", conditionMessage(w))) {
        invokeRestart("muffleWarning")
      }
    }
  )
}

# The packages of the tree that do not load, each checked in a fresh R
# process with the kept library first. A Debian package can break when a
# dependency it was built with is replaced by a newer CRAN release (Debian's
# knitr 1.42 imports xfun::attr(), which current xfun no longer has): those
# are built from CRAN too, and so is anything that failed to build because of
# them.
not_loading <- function(pkgs) {
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script))
  writeLines(c(
    "for (p in commandArgs(TRUE)) {",
    "  ok <- tryCatch({ loadNamespace(p); TRUE }, error = function(e) FALSE)",
    "  if (!ok) cat(p, '\\n', sep = '')",
    "}"
  ), script)
  out <- system2(file.path(R.home("bin"), "Rscript"), c("--vanilla", script, pkgs),
                 stdout = TRUE, stderr = FALSE, env = paste0("R_LIBS=", paste(.libPaths(), collapse = ":")))
  intersect(trimws(out), pkgs)
}

# Two packages build at a time (Ncpus), and each with two make jobs: long
# dependency chains (cpp11 -> systemfonts -> textshaping -> ragg) build one
# package at a time otherwise.
if (!nzchar(Sys.getenv("MAKEFLAGS"))) Sys.setenv(MAKEFLAGS = paste0("-j", max(1L, parallel::detectCores())))
started <- Sys.time()
built <- character()
for (round in 1:3) {
  if (length(build)) {
    install(build)
    built <- union(built, build)
  }
  build <- setdiff(not_loading(tree), base)
  if (!length(build)) break
  cat("lane 2: these do not load, building them from CRAN:", paste(build, collapse = " "), "\n")
}
if (length(built)) {
  cat(sprintf("lane 2: built %d packages in %.0f s\n", length(built), as.numeric(Sys.time() - started, units = "secs")))
} else {
  cat("lane 2: the kept library is current, nothing to build\n")
}

bad <- character()
for (p in tree) {
  have <- installed_version(p, .libPaths())
  want <- if (p %in% direct) ap[p, "Version"] else floor_of[[p]]
  if (is.null(have) || (!is.null(want) && have < package_version(want))) bad <- c(bad, p)
}
bad <- union(bad, not_loading(direct))
if (length(bad)) stop("lane 2: could not build or load: ", paste(bad, collapse = ", "))
for (p in direct) cat(sprintf("lane 2: %-10s %s\n", p, format(installed_version(p, .libPaths()))))
