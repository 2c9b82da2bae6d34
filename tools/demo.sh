#!/usr/bin/env bash
# Installs what is missing and the package, then runs the avalanche
# demonstration: on 127.0.0.1, a downstream service goes healthy -> hanging ->
# failing -> healthy while a plumber API with a trivial, a guarded, an async
# guarded and an unguarded endpoint is under concurrent load. Prints a table
# per phase (requests/s, p50/p99 latency, fallback share), the breakers'
# transitions and the headline checks, and saves avalanche.png here.
# About two minutes. (A shorter demonstration: Rscript -e 'circuitbreaker::breaker_demo()'.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
Rscript --vanilla -e 'invisible(circuitbreaker::breaker_avalanche_demo(plot_file = "avalanche.png"))'
