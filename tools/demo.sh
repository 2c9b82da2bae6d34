#!/usr/bin/env bash
# Installs what is missing and the package, then runs the avalanche
# demonstration (bench/avalanche/): on 127.0.0.1, a downstream service goes
# healthy -> hanging -> failing -> healthy while a plumber API with a trivial,
# a guarded, an async guarded and an unguarded endpoint is under concurrent
# load. Prints a table per phase (requests/s, p50/p99 latency, fallback
# share), the breakers' transitions and the headline checks, and saves
# avalanche.png here. About two minutes. Options of the run (phase seconds,
# --quiet, ...): Rscript bench/avalanche/run.R --help.
# (A shorter story, without a network: vignette("getting-started", package =
# "circuitbreaker"), or demo("getting-started", package = "circuitbreaker").)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
Rscript --vanilla bench/avalanche/run.R --plot avalanche.png
