#!/usr/bin/env bash
# Installs what is missing and the package, then runs three demonstrations,
# everything on 127.0.0.1:
# * the avalanche (bench/avalanche/): a downstream service goes
#   healthy -> hanging -> failing -> healthy while a plumber API with a
#   trivial, a guarded, an async guarded and an unguarded endpoint is under
#   concurrent load. Prints a table per phase (requests/s, p50/p99 latency,
#   fallback share), the breakers' transitions and the headline checks, and
#   saves avalanche.png here. About two minutes. Options of the run (phase
#   seconds, --quiet, ...): Rscript bench/avalanche/run.R --help.
# * the host-shared breaker (bench/host-shared/): four plumber worker
#   processes guard one failing downstream, once with a breaker per process
#   and once with one breaker shared by the host (breaker_store_host()).
#   Prints, from the downstream's own log, the calls that reached it (per
#   worker, opening calls and probes) and when each worker stopped calling:
#   per-process breakers send four times failure_threshold plus one probe
#   per open period, the shared one that count once (plus any call another
#   worker had in flight when it opened). About 30 s.
#   Options (--workers, --seconds, --quiet, ...): Rscript
#   bench/host-shared/run.R --help.
# * the bulkhead (bench/bulkhead/): four plumber workers share one breaker to
#   a downstream that starts to hang; a trivial endpoint on the same workers
#   is timed healthy and hanging, without a bulkhead, with max_concurrent = 1
#   and with share(0.5). Prints the trivial endpoint's requests/s and p99 in
#   both phases. About a minute. Options: Rscript bench/bulkhead/run.R --help.
# (A shorter story, without a network: vignette("getting-started", package =
# "circuitbreaker"), or demo("getting-started", package = "circuitbreaker").)
set -euo pipefail
cd "$(dirname "$0")/.."
echo "demo.sh: installing what is missing (tools/setup.sh), then three demonstrations:"
echo "the avalanche (about two minutes), a host-shared breaker (about 30 s), a bulkhead (about a minute)."
bash tools/setup.sh
cat <<'INTRO'

== Three demonstrations follow ==
1. The avalanche (about two minutes): a plumber API whose downstream service
   hangs, then fails, then recovers. The endpoints guarded by a breaker keep
   answering within milliseconds (with a fallback) while the unguarded one
   queues behind the downstream timeout. It saves avalanche.png here.
2. A host-shared breaker (about 30 s): four plumber worker processes guard one
   failing downstream, first with a breaker per process, then with one breaker
   shared by the host. It counts the calls that reach the dead downstream: the
   shared breaker stops all four workers after one failure_threshold.
3. A bulkhead (about a minute): the same four workers, a downstream that hangs,
   and an endpoint that calls nothing. Without a bulkhead every worker ends up
   waiting on the downstream and that endpoint stops answering too; with
   max_concurrent = 1 (or share(0.5)) the other workers keep it at full speed.
The avalanche's speed targets are for a quiet machine: on a loaded one they can
be missed without the breaker failing (its report says which rows are which).

== 1 of 3: the avalanche ==
INTRO
Rscript --vanilla bench/avalanche/run.R --plot avalanche.png
printf '\n== 2 of 3: the host-shared breaker ==\n'
Rscript --vanilla bench/host-shared/run.R
printf '\n== 3 of 3: the bulkhead ==\n'
Rscript --vanilla bench/bulkhead/run.R
