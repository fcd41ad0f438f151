#!/usr/bin/env bash
# The built-in demo (make demo): the GPT-2 engine trained under the tracer, then the report of its run.
# Argument: the meson build dir. Extra arguments go to plateau-train (e.g. --leak graph --leak-start 50).
set -euo pipefail
build=${1:-build}
shift || true
# passive OpenMP waiting: spinning workers starve the tracer's threads and each other on a 2-core machine
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
exec "$build/cli/plateau" run -o "plateau-run-demo-$(date +%Y%m%d-%H%M%S)" -- "$build/training/plateau-train" "$@"
