#!/bin/bash
# cli.report_html: `plateau report --html` renders in headless Chromium without console errors.
# usage: test_report_html.sh PLATEAU GENERATOR [KEEP_DIR]. Chromium is required (Makefile PKGS installs Debian's `chromium`):
# when it is missing this test fails, it does not skip. Leaves the screenshot in KEEP_DIR (default /tmp) as
# report-screenshot.png for a human look.
set -u
plateau=$1 gen=$2
fail() { echo "FAIL: $*"; exit 1; }
chromium=${PL_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$chromium" ] || fail "chromium not found: install Debian's chromium package (make deps does)"
tmp=$(mktemp -d /tmp/pl-test-html-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
keep=${3:-/tmp}/report-screenshot.png

# LOG PNG URL: one headless page load with the console routed to LOG
shoot() {
    timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 --window-size=1280,3000 \
        --screenshot="$2" "$3" >/dev/null 2>"$1"
}
console_errors() { grep -E 'CONSOLE|Uncaught|Refused to' "$1"; }

"$gen" "$tmp/run.pltrace" || fail "trace generator failed"
"$plateau" report "$tmp/run.pltrace" --html "$tmp/report.html" >"$tmp/out" || fail "plateau report exited $?"
[ -s "$tmp/report.html" ] || fail "no HTML written"

# the checker must see a broken page as broken (otherwise a green result means nothing)
printf '<!DOCTYPE html><html><body>x<script>plateau_undefined_fn()</script></body></html>\n' >"$tmp/bad.html"
shoot "$tmp/bad.log" "$tmp/bad.png" "file://$tmp/bad.html" || fail "chromium failed on the control page"
console_errors "$tmp/bad.log" >/dev/null || fail "console error detection does not work (control page passed)"

shoot "$tmp/report.log" "$tmp/report.png" "file://$tmp/report.html" || { cat "$tmp/report.log"; fail "chromium failed"; }
if console_errors "$tmp/report.log"; then fail "console errors in the report page"; fi
[ "$(head -c 8 "$tmp/report.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "screenshot is not a PNG"
size=$(stat -c %s "$tmp/report.png")
[ "$size" -gt 20000 ] || fail "screenshot suspiciously small ($size bytes): blank page?"
cp "$tmp/report.png" "$keep" 2>/dev/null || true

# the DOM as Chromium parsed it: charts and tables are there
timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --user-data-dir="$tmp/profile" --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" 2>/dev/null ||
    fail "chromium --dump-dom failed"
n_svg=$(grep -o '<svg' "$tmp/dom.html" | wc -l)
[ "$n_svg" -ge 8 ] || fail "expected a chart per metric, found $n_svg <svg>"
grep -q 'leaky_collect' "$tmp/dom.html" || fail "call site table missing"
grep -q 'fitted tail' "$tmp/dom.html" || fail "fitted tail line missing"
echo "ok: screenshot $size bytes, $n_svg charts, no console errors (screenshot kept at $keep)"
