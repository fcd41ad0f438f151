#!/bin/bash
# Run a libFuzzer binary for a bounded time: run-fuzzer.sh BINARY [ARGS...]
exec "$1" -max_total_time="${PL_FUZZ_SECONDS:-20}" -rss_limit_mb=1024 "${@:2}"
