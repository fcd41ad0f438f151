#!/usr/bin/env python3
"""Print one line `N passed, N failed, N skipped` counted from meson's test logs of the given build dirs (every
meson-logs/testlog*.json: `make test-torch2` writes testlog-torch2.json beside test-main's testlog.json).

Exit status 1 when any test failed or when nothing ran at all (an empty run must be visible as such)."""
import glob
import json
import os
import sys

passed = failed = skipped = 0
logs = [p for build in sys.argv[1:] for p in sorted(glob.glob(os.path.join(build, "meson-logs", "testlog*.json")))]
for path in logs:
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            result = json.loads(line).get("result", "")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:
                failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or passed == 0 else 0)
