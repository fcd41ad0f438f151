#!/bin/bash
# Regenerate the plateau tune / replay goldens (tests/tune/golden/) from a configured build dir, validate the JSON
# documents in them, and show what changed. Review the diff before committing: a golden change is a user-visible
# output change.
#   tools/regen-tune-goldens.sh [BUILD_DIR]    (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
ninja -C "$build" cli/plateau >/dev/null
mkdir -p "$build/tests/tune"
PL_REGEN_GOLDEN=1 "$root/tests/tune/test_golden.sh" "$(cd "$build" && pwd)/cli/plateau" "$root/tests/fixtures" \
  "$root/tests/tune/golden" "$(cd "$build" && pwd)/tests/tune"
python3 - "$root/tests/tune/golden" <<'PY'
import json, os, re, sys
for name in sorted(os.listdir(sys.argv[1])):
    text = open(os.path.join(sys.argv[1], name)).read()
    for part in re.split(r'^--- (?:stdout|stderr|json)\n', text, flags=re.M)[1:]:
        if part.startswith('{'):
            try:
                json.loads(part)
            except ValueError as e:
                sys.exit(f"invalid JSON in {name}: {e}")
PY
git -C "$root" diff --stat -- tests/tune/golden || true
