#!/bin/bash
# Regenerate the renderer goldens (tests/reports/golden/) from a configured build dir, validate the JSON, and show
# what changed. Review the diff before committing: a golden change is a user-visible output change.
#   tools/regen-report-goldens.sh [BUILD_DIR]    (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
ninja -C "$build" tests/reports/test_reports_render >/dev/null
PL_REGEN_GOLDEN=1 "$build/tests/reports/test_reports_render" "$root/tests/reports/golden"
for f in "$root"/tests/reports/golden/*.json; do
  python3 -m json.tool "$f" >/dev/null || { echo "invalid JSON: $f" >&2; exit 1; }
done
git -C "$root" diff --stat -- tests/reports/golden || true
