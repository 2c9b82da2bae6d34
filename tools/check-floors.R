# The lowest versions DESCRIPTION supports are the ones lane 1 tests: for each
# dependency that lane 1 takes from Debian (installed under /usr/lib/R), the
# floor in DESCRIPTION must be exactly Debian's version. A floor above it
# would not install in lane 1; one below it would claim support for versions
# no lane tests. Dependencies Debian does not package (mirai, otel, otelsdk,
# plumber2, bslib when absent) come from CRAN and are not checked here.
#
#   Rscript --vanilla tools/check-floors.R    (after bash tools/setup.sh)

fields <- read.dcf("DESCRIPTION", c("Imports", "Suggests"))  # LinkingTo: Rcpp, floored in Imports
deps <- trimws(unlist(strsplit(paste(fields[!is.na(fields)], collapse = ","), ",")))
deps <- deps[nzchar(deps)]
name <- sub("\\s*\\(.*$", "", deps)
floor <- ifelse(grepl(">=", deps), sub("^.*>=\\s*([0-9.-]+)\\s*\\).*$", "\\1", deps), NA_character_)
base <- rownames(utils::installed.packages(priority = "base"))

problems <- character()
checked <- 0L
for (i in seq_along(name)) {
  p <- name[[i]]
  if (p %in% c(base, "R")) next
  where <- tryCatch(dirname(system.file(package = p)), error = function(e) "")
  if (!nzchar(system.file(package = p)) || !startsWith(where, "/usr/lib/R")) next
  have <- as.character(utils::packageVersion(p))
  checked <- checked + 1L
  if (is.na(floor[[i]])) {
    problems <- c(problems, sprintf("%s: no floor in DESCRIPTION; lane 1 tests %s", p, have))
  } else if (package_version(floor[[i]]) != package_version(have)) {
    problems <- c(problems, sprintf("%s: DESCRIPTION says >= %s; lane 1 tests %s", p, floor[[i]], have))
  }
}
# knitr and rmarkdown build the vignettes; any version Debian has will do.
problems <- problems[!grepl("^(knitr|rmarkdown): no floor", problems)]
if (length(problems)) {
  cat("floors: DESCRIPTION and lane 1 disagree:\n", paste0("  ", problems, "\n"), sep = "")
  quit(status = 1)
}
cat(sprintf("floors: OK (%d dependencies from Debian, each at DESCRIPTION's floor)\n", checked))
