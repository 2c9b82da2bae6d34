# How the benchmarks print times, ratios, counts and verdicts.

# A time in nanoseconds: "812 ns", "1.25 us" from 1 us, "1.25 ms" from 1 ms.
fmt <- function(ns) {
  if (ns >= 1e6) {
    sprintf("%.2f ms", ns / 1e6)
  } else if (ns >= 1000) {
    sprintf("%.2f us", ns / 1000)
  } else {
    sprintf("%.0f ns", ns)
  }
}
# A ratio: "1.07x" ("35x" from 100x).
fmt_x <- function(x) if (max(x) >= 100) sprintf("%.0fx", x) else sprintf("%.2fx", x)
# The range of `x`, each end formatted by `f`: "1.02x-1.09x".
fmt_range <- function(x, f) paste0(f(min(x)), "-", f(max(x)))
# A count with thousands separators: "12,345".
fmt_n <- function(x) formatC(round(x), format = "d", big.mark = ",")
verdict <- function(ok) if (ok) "met" else "MISSED"

# Table rows of per-run values (one column a run), then the median (bold)
# and the range: times in nanoseconds, and ratios against a budget.
time_row <- function(label, x) {
  paste0("| ", label, " | ", paste(vapply(x, fmt, ""), collapse = " | "), " | **", fmt(median(x)),
         "** | ", fmt_range(x, fmt), " |")
}
# `budget` NA: a control, reported only. `at_most`: the median must be at
# most `budget` (else at least); "(not in every run)" when some run missed.
ratio_row <- function(label, x, budget = NA, at_most = TRUE) {
  head <- paste0("| ", label, " | ", paste(vapply(x, fmt_x, ""), collapse = " | "), " | **", fmt_x(median(x)),
                 "** | ", fmt_range(x, fmt_x), " | ")
  if (is.na(budget)) return(paste0(head, "- | noise alone |"))
  ok <- if (at_most) median(x) <= budget else median(x) >= budget
  not_all <- ok && any(if (at_most) x > budget else x < budget)
  paste0(head, if (at_most) "<= " else ">= ", budget, "x | ", verdict(ok),
         if (not_all) " (not in every run)" else "", " |")
}
