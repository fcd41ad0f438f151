#!/bin/bash
# Integration: how a run ended (docs/end-of-run.md), in text and JSON, and what was live then.
#   signals  tests/targets/lateleak.c leaking 256 KiB per step, then killed by SIGKILL (standing in for the OOM
#            killer: this sandbox gives no memory cgroup to limit; the OOM counts then say none was counted), crashed
#            by SIGSEGV, aborted: each named, with the sites live at the last record (leak_later first) and what grew
#            in the last steps
#   python   a PyTorch loop under an address-space limit (prlimit --as) that ends by an uncaught MemoryError
#            (tests/targets/py_oom.py), and torch's OutOfMemoryError raised uncaught by a stand-in torch.cuda on the
#            CPU (tests/python/cuda_standin.py --oom-at: no GPU here), whose allocator counters at that moment (not
#            at the last step's) are reported
# Usage: test_end.sh signals|python PLATEAU TARGETS_DIR SOURCE_ROOT
set -u
CASE=$1
P=$2
T=$3
SRC=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
PY=/usr/bin/python3

# end_json DIR FIELD EXPECTED-HOW: the JSON report's end object of the root process
end_json() {
  "$P" report "$1" --json "$tmp/r.json" >/dev/null 2>&1 || fail "report --json $1"
  python3 - "$tmp/r.json" "$2" <<'PY' || fail "JSON end of $1"
import json, sys
d = json.load(open(sys.argv[1]))
ends = [p["end"] for p in d["run"]["processes"] if p["end"]["how"] == sys.argv[2]]
assert ends, [p["end"]["how"] for p in d["run"]["processes"]]
e = ends[0]
print("JSON end:", json.dumps({k: e[k] for k in ("how", "line", "signal", "exit_status", "oom_kill", "exception")}))
if sys.argv[2] in ("sigkill", "oom-kill", "crash"):
    at = e["at"]
    assert at and at["live"], e
    assert any("leak_later" in f for f in at["live"][0]["frames"]), at["live"][0]
    assert at["last_steps"]["top"] and at["last_steps"]["growth_bytes"] > 5 * 262144, at["last_steps"]
PY
}

case $CASE in
signals)
  for end in kill segv abort; do
    PLATEAU_SAMPLE_BYTES=0 "$P" run --no-report --no-live -o "$tmp/$end" -- "$T/target_lateleak" 20 40 262144 "$end" \
      >/dev/null 2>&1
    "$P" report "$tmp/$end" >"$tmp/$end.txt" 2>&1 || fail "report $end"
    sed -n '/^end of pid/,$p' "$tmp/$end.txt"
    grep -q "^end of pid [0-9]* (target_lateleak): " "$tmp/$end.txt" || fail "$end: no end-of-run line"
    grep -A2 "live by call site at its last record" "$tmp/$end.txt" | grep -q "leak_later" ||
      fail "$end: leak_later is not the first live site"
    grep -q "grew after step 50 (its last 10 steps" "$tmp/$end.txt" || fail "$end: the last steps' growth"
  done
  grep -q "^end of pid [0-9]* (target_lateleak): killed by SIGKILL" "$tmp/kill.txt" || fail "SIGKILL not said"
  cat "$tmp/kill/run.status"
  if grep -q " host_oom_kill 0" "$tmp/kill/run.status"; then
    grep -q "the kernel counted no OOM kill on this host while it ran" "$tmp/kill.txt" || fail "no OOM kill, not said"
  fi
  grep -q "crashed: SIGSEGV (signal 11)" "$tmp/segv.txt" || fail "SIGSEGV not said"
  grep -q "crashed: SIGABRT (signal 6), an abort" "$tmp/abort.txt" || fail "SIGABRT not said"
  grep "^end of pid" "$tmp/segv.txt" | grep -q "OOM\|out of memory" && fail "a crash called an OOM"
  "$P" report "$tmp/kill" --html "$tmp/kill.html" >/dev/null 2>&1 || fail "report --html"
  grep -q "<b>How it ended:</b> killed by SIGKILL" "$tmp/kill.html" || fail "HTML: how it ended"
  grep -q "Live by call site at its last record" "$tmp/kill.html" || fail "HTML: live sites"
  end_json "$tmp/kill" sigkill
  end_json "$tmp/segv" crash
  # a clean exit says nothing of an end
  "$P" run --no-report --no-live -o "$tmp/clean" -- "$T/target_lateleak" 5 5 >/dev/null 2>&1 || fail "clean run"
  "$P" report "$tmp/clean" | grep -q "^end of pid" && fail "a clean exit has an end-of-run line"
  echo "ok: SIGKILL, SIGSEGV and SIGABRT said, with what was live and what grew last"
  ;;
python)
  $PY -c "import torch" 2>/dev/null || { echo "SKIP: $PY has no torch"; exit 77; }
  vm=$("$P" run --no-report --no-live -o "$tmp/vm" -- $PY "$SRC/tests/targets/py_oom.py" --vm 2>/dev/null | tail -1)
  [[ $vm =~ ^[0-9]+$ ]] || fail "VmSize under plateau run: '$vm'"
  limit=$(( (vm + 600 * 1024) * 1024 ))  # 600 MiB above what the traced interpreter maps with torch
  "$P" run --no-report --no-live -o "$tmp/mem" -- prlimit --as=$limit $PY "$SRC/tests/targets/py_oom.py" \
    >/dev/null 2>"$tmp/mem.err"
  rc=$?
  [ $rc -eq 1 ] || fail "py_oom.py under prlimit --as: exit $rc, not 1: $(tail -3 "$tmp/mem.err")"
  grep -q "^MemoryError" "$tmp/mem.err" || fail "no MemoryError: $(tail -3 "$tmp/mem.err")"
  "$P" report "$tmp/mem" >"$tmp/mem.txt" 2>&1 || fail "report mem"
  sed -n '/^end of pid/,$p' "$tmp/mem.txt"
  grep -q "^end of pid [0-9]* (python3 py_oom.py): ended by an uncaught MemoryError: the host ran out of memory" \
    "$tmp/mem.txt" || fail "MemoryError not said"
  grep -A3 "live by call site at the exception" "$tmp/mem.txt" | grep -q "py_oom.py:[0-9]* in keep_more" ||
    fail "keep_more is not the first live site at the exception"
  grep -q "plateau:uncaught" "$tmp/mem.txt" && fail "the bootstrap's record shown as a user's mark"
  grep -q "^end of pid [0-9]* (prlimit)" "$tmp/mem.txt" && fail "the image that exec'd python given the command's status"
  end_json "$tmp/mem" memory-error

  "$P" run --no-report --no-live -o "$tmp/cuda" -- $PY "$SRC/tests/python/cuda_standin.py" --steps 60 --oom-at 40 \
    >/dev/null 2>"$tmp/cuda.err"
  rc=$?
  [ $rc -eq 1 ] || fail "cuda_standin.py --oom-at 40: exit $rc, not 1: $(tail -3 "$tmp/cuda.err")"
  grep -q "OutOfMemoryError: CUDA out of memory" "$tmp/cuda.err" || fail "the OOM is not torch's: $(tail -2 "$tmp/cuda.err")"
  "$P" report "$tmp/cuda" >"$tmp/cuda.txt" 2>&1 || fail "report cuda"
  sed -n '/^end of pid/,$p' "$tmp/cuda.txt"
  grep -q "ended by an uncaught torch.cuda.OutOfMemoryError: the device ran out of memory (exit status 1)" \
    "$tmp/cuda.txt" || fail "the CUDA OOM not said"
  # the stand-in's counters when the error was made (1000 MiB allocated, 1.10 GiB reserved, 98 MiB split), not the
  # last step's (100 MiB, 128 MiB, 2 MiB)
  grep -q "torch's CUDA allocator when the OOM was raised (step 40): allocated 1000 MiB, reserved 1.10 GiB, inactive in split blocks 98.0 MiB" \
    "$tmp/cuda.txt" || fail "torch's counters at the OOM"
  end_json "$tmp/cuda" cuda-oom
  echo "ok: an uncaught MemoryError and a CUDA OOM said, with what was live and torch's counters at the OOM"
  ;;
*) fail "unknown case $CASE" ;;
esac
