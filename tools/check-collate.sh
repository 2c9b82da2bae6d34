#!/usr/bin/env bash
# Checks that the package does not depend on the alphabetical order of R/'s
# files: in a copy, every file in R/ is renamed so that the alphabetical
# order is the reverse of the order they load in (each file then sorts before
# the files it needs), references in `@include` follow, roxygen2 rewrites
# `Collate:` from the `@include` tags, and the copy must install and work. A
# missing `@include` makes it fail.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git ls-files -z | xargs -0 -I{} cp --parents {} "$work/" 2>/dev/null || cp -r . "$work/"
cd "$work"
# The load order roxygen2 derives now, reversed.
files=$(Rscript --vanilla -e 'd <- read.dcf("DESCRIPTION", fields = "Collate")[1, 1]
  f <- scan(text = gsub("\n", " ", d), what = "", quiet = TRUE)
  cat(rev(setdiff(f, "RcppExports.R")), sep = "\n")')
i=0
for f in $files; do
  i=$((i + 1))
  new=$(printf 'z%02d-%s' "$i" "$f")
  git mv -f "R/$f" "R/$new" 2>/dev/null || mv "R/$f" "R/$new"
  # In `@include` lines, the name as a whole word (not inside a new name).
  sed -i -E "/@include/ s/(^|[ ])${f//./\\.}([ ]|$)/\1$new\2/g; /@include/ s/(^|[ ])${f//./\\.}([ ]|$)/\1$new\2/g" R/*.R
done
Rscript --vanilla -e 'roxygen2::update_collate(".")' >/dev/null
[ -n "${CB_DEBUG_COLLATE:-}" ] && { grep -A 22 Collate DESCRIPTION; grep -n "@include" R/*.R; }
lib="$work/lib"
mkdir -p "$lib"
R CMD INSTALL -l "$lib" . >"$work/install.log" 2>&1 || { tail -n 30 "$work/install.log"; echo "collate check: the renamed copy does not install" >&2; exit 1; }
R_LIBS="$lib" Rscript --vanilla -e '
  library(circuitbreaker)
  cb <- circuit_breaker(failure_threshold = 1)
  cb$execute(function() stop("down"), function() NULL)
  stopifnot(identical(cb$state, "OPEN"), identical(formals(circuit_breaker)$failure_threshold, 5))'
echo "collate check: OK (R/ renamed into reverse order, Collate regenerated, installed and ran)"
