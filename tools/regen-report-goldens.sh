#!/bin/bash
# Regenerate the report goldens (tests/reports/golden/: renderers, extract, compare, trace events) from a configured
# build dir, validate the JSON, and show what changed. Review the diff before committing: a golden change is a
# user-visible output change.
#   tools/regen-report-goldens.sh [BUILD_DIR]    (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
# render: the text and JSON report; extract: the report with its "run" object; compare and export: the comparison
# JSON and the trace events
tests="render extract compare export"
for t in $tests; do ninja -C "$build" "tests/reports/test_reports_$t" >/dev/null; done
for t in $tests; do PL_REGEN_GOLDEN=1 "$build/tests/reports/test_reports_$t" "$root/tests/reports/golden" >/dev/null; done
for f in "$root"/tests/reports/golden/*.json; do
  python3 -m json.tool "$f" >/dev/null || { echo "invalid JSON: $f" >&2; exit 1; }
done
git -C "$root" diff --stat -- tests/reports/golden || true
