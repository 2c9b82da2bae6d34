# Wall-clock and CPU time for the benchmarks. CPU time comes from /proc
# (Linux), in clock ticks of `getconf CLK_TCK` per second.

# Seconds since the epoch (CLOCK_REALTIME: comparable across the processes of
# the machine, network namespaces included).
now <- function() as.numeric(Sys.time())

clock_ticks <- as.numeric(system2("getconf", "CLK_TCK", stdout = TRUE))

# utime + stime of one stat file (/proc/<pid>/stat, /proc/self/task/<tid>/stat),
# in seconds: fields 14 and 15, counted after the command name in
# parentheses (which may contain spaces). 0 when the file is gone (a thread
# or process that ended).
stat_cpu <- function(path) {
  line <- tryCatch(readLines(path, n = 1L, warn = FALSE), error = function(e) "", warning = function(w) "")
  if (!length(line) || !nzchar(line)) return(0)
  fields <- strsplit(sub("^.*\\) ", "", line), " ", fixed = TRUE)[[1]]
  sum(as.numeric(fields[12:13])) / clock_ticks
}
# A process's CPU seconds so far (every thread).
process_cpu <- function(pid) stat_cpu(file.path("/proc", pid, "stat"))
# This process's threads (their ids), and the CPU seconds of some of them.
threads <- function() list.files("/proc/self/task")
thread_cpu <- function(tids) sum(vapply(file.path("/proc/self/task", tids, "stat"), stat_cpu, 0))
# Busy CPU time of the whole machine so far, in seconds (the first line of
# /proc/stat: user, nice, system, irq, softirq).
busy_cpu_seconds <- function() {
  ticks <- as.numeric(strsplit(readLines("/proc/stat", n = 1L), " +")[[1]][-1])
  sum(ticks[c(1, 2, 3, 6, 7)]) / clock_ticks
}
