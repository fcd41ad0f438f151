#!/bin/bash
# cli.report_html: the HTML report of a real leaking run and of a real plateau run (`plateau run` over the leak and
# plateau targets), opened in headless Chromium: no console errors, every chart's lines drawn (non-empty `d` on the
# SVG paths), the verdict before the charts, and screenshots at desktop (1280 px) and narrow (420 px) widths kept in
# KEEP_DIR/html-report/ as test artefacts.
# usage: test_report_html.sh PLATEAU TARGETS_DIR KEEP_DIR
# Skips (exit 77) when Chromium is missing: `make deps-test` installs Debian's `chromium`. PL_CHROMIUM picks another
# binary. With PL_HTML_TORCH=1 and a Python whose torch imports (PL_HTML_PYTHON, default /usr/bin/python3), it also
# runs tests/targets/py_torch_append.py (a PyTorch loop that keeps every step's logits; ~15 s more) and keeps its
# screenshots, and the top of its page as torch-docs.png (1000x1100): docs/report.png is made that way.
set -u
plateau=$1 targets=$2 keep=${3:-/tmp}/html-report
fail() { echo "FAIL: $*"; exit 1; }
chromium=${PL_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$chromium" ]; then
    echo "SKIP: chromium not found (install Debian's chromium package: make deps-test)"
    exit 77
fi
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/pl-test-html-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$keep" || fail "cannot create $keep"

# LOG PNG WIDTH HEIGHT URL: one headless page load with the console routed to LOG
shoot() {
    timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 --hide-scrollbars --window-size="$3,$4" \
        --screenshot="$2" "$5" >/dev/null 2>"$1"
}
console_errors() { grep -E 'CONSOLE|Uncaught|Refused to' "$1"; }

# the checker must see a broken page as broken (otherwise a green result means nothing)
printf '<!DOCTYPE html><html><body>x<script>plateau_undefined_fn()</script></body></html>\n' >"$tmp/bad.html"
shoot "$tmp/bad.log" "$tmp/bad.png" 400 300 "file://$tmp/bad.html" || fail "chromium failed on the control page"
console_errors "$tmp/bad.log" >/dev/null || fail "console error detection does not work (control page passed)"

# LOG WHAT COMMAND...: run it, its output into LOG; on failure show LOG and fail
ok_or_fail() {
    local log=$1 what=$2
    shift 2
    "$@" >"$log" 2>&1 || { cat "$log"; fail "$what"; }
}

# NAME: the report of run $tmp/NAME in Chromium, its DOM checked by check_report_dom.py, screenshots kept
page() {
    local name=$1 html=$tmp/$1.html png
    ok_or_fail "$tmp/$name.out" "plateau report $name" "$plateau" report "$tmp/$name" --html "$html"
    for w in 1280 420; do
        png=$keep/$name-$w.png
        shoot "$tmp/$name-$w.log" "$png" "$w" 2400 "file://$html" ||
            { cat "$tmp/$name-$w.log"; fail "chromium $name $w"; }
        if console_errors "$tmp/$name-$w.log"; then fail "console errors in the $name page at $w px"; fi
        [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$png is not a PNG"
        size=$(stat -c %s "$png")
        [ "$size" -gt 20000 ] || fail "$png suspiciously small ($size bytes): blank page?"
    done
    timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --user-data-dir="$tmp/profile" --dump-dom "file://$html" >"$tmp/$name.dom" 2>/dev/null ||
        fail "chromium --dump-dom $name"
    python3 "$src/tests/cli/check_report_dom.py" "$tmp/$name.dom" "$name" || fail "the $name page's DOM"
}

for kind in leak plateau; do
    ok_or_fail "$tmp/run-$kind.out" "plateau run $kind" "$plateau" run -o "$tmp/$kind" -- "$targets/target_$kind" 400
done
page leak
page plateau
if [ "${PL_HTML_TORCH:-0}" = 1 ]; then
    py=${PL_HTML_PYTHON:-/usr/bin/python3}
    "$py" -c 'import torch' 2>/dev/null || fail "PL_HTML_TORCH=1 but $py cannot import torch"
    ok_or_fail "$tmp/run-torch.out" "plateau run torch" \
        "$plateau" run -o "$tmp/torch" -- "$py" "$src/tests/targets/py_torch_append.py"
    page torch
    # the top of the page, for docs/report.png: verdict, sites, holders and the first charts
    shoot "$tmp/torch-docs.log" "$keep/torch-docs.png" 1000 1100 "file://$tmp/torch.html" || fail "chromium torch docs"
fi
echo "ok: leak and plateau pages without console errors, charts drawn; screenshots in $keep"
