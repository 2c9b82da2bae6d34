#!/usr/bin/env bash
# Installs what is missing and the package, then runs the demonstration:
# a local HTTP server on 127.0.0.1 fails for a while and recovers, and the
# same calls are made with and without a circuit breaker.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
Rscript --vanilla -e 'circuitbreaker::breaker_demo()'
