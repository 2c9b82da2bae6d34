#!/usr/bin/env bash
# Installs what is missing and the package, then runs two demonstrations,
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
# (A shorter story, without a network: vignette("getting-started", package =
# "circuitbreaker"), or demo("getting-started", package = "circuitbreaker").)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
Rscript --vanilla bench/avalanche/run.R --plot avalanche.png
Rscript --vanilla bench/host-shared/run.R
