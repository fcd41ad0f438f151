#!/bin/bash
# Run a libFuzzer binary for a bounded time: run-fuzzer.sh BINARY [ARGS...]
# -error_exitcode=1: libFuzzer's default for a crash, a failed check or a sanitizer report is 77, which meson reads
# as a skipped test: a fuzzer that found something would have passed as SKIP.
# UBSAN_OPTIONS halt_on_error=1: a UBSan finding (signed overflow, a bad shift) stops the fuzzer like a crash, so it
# fails the test; without it UBSan prints and carries on.
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
exec "$1" -max_total_time="${PL_FUZZ_SECONDS:-20}" -rss_limit_mb=1024 -error_exitcode=1 "${@:2}"
