#!/bin/bash
# Integration: a run through a pyenv-like shim (a bash script that runs 50 helpers, then execs
# python3) reports on one screen and leads with the Python process; the helpers are one count-by-name line, every
# process is still in the JSON (each short helper flagged "helper": true), and --all-processes shows each, in plateau
# report and in the report plateau run prints. Usage: test_helpers.sh PLATEAU
set -u
P=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat >"$tmp/python3-shim" <<'SH'
#!/bin/bash
# like a pyenv shim: version lookups through helpers, then the real interpreter
for i in $(seq 1 50); do
  case $((i % 3)) in 0) readlink -f "$0" >/dev/null ;; 1) env true ;; 2) bash -c ':' ;; esac
done
exec python3 "$@"
SH
chmod +x "$tmp/python3-shim"
cat >"$tmp/train.py" <<'PY'
import ctypes, time
step = getattr(ctypes.CDLL(None), "plateau_step", lambda: None)
cache = []
for i in range(150):
    if i < 20:
        cache.append(bytearray(256 * 1024))  # a warmup
    batch = [bytearray(4096) for _ in range(16)]
    step()
    time.sleep(0.004)
PY
# --all-processes passes through to the report plateau run prints (every process in full there)
"$P" run --no-live --all-processes -o "$tmp/run" -- "$tmp/python3-shim" "$tmp/train.py" >"$tmp/out.txt" 2>&1 ||
    fail "run failed"
"$P" report "$tmp/run" --json "$tmp/r.json" >"$tmp/report.txt" || fail "report failed"
cat "$tmp/report.txt"
n=$(ls "$tmp/run"/*.pltrace | wc -l)
[ "$n" -ge 51 ] || fail "only $n traces: the helpers were not traced"
lines=$(wc -l <"$tmp/report.txt")
[ "$lines" -le 40 ] || fail "the report has $lines lines for $n processes: not one screen"
first=$(grep -m1 "^process " "$tmp/report.txt")
[[ $first == *"python3 train.py"* ]] || fail "the report does not lead with the Python process: $first"
grep -q "^process .*bash\|^process .*readlink\|^process .*env" "$tmp/report.txt" && fail "a helper has its own block"
grep -Eq "^[0-9]+ short helper processes: .*bash [0-9]+.*; none leaks" "$tmp/report.txt" || fail "no helper count line"
for h in readlink env; do grep -E "short helper processes:.* $h [0-9]+" "$tmp/report.txt" >/dev/null || fail "$h not counted"; done
grep -E "^ +[0-9]+ +[0-9]+ .* (bash|readlink|env) " "$tmp/report.txt" && fail "a helper has its own table row"
python3 - "$tmp/r.json" "$n" <<'PYC' || fail "JSON does not keep every process, or flags the helpers wrongly"
import json, sys
d = json.load(open(sys.argv[1]))
procs = d["run"]["processes"] if "processes" in d.get("run", {}) else d["processes"]
assert len(procs) >= int(sys.argv[2]), (len(procs), sys.argv[2])
helpers = [p for p in procs if p["helper"]]
assert len(helpers) >= 45, ("helper flags", len(helpers))
py = [p for p in procs if "train.py" in p["argv"] and p["exe"].split("/")[-1].startswith("python")]
assert py and not any(p["helper"] for p in py), py
PYC
run_all=$(grep -c "^process " "$tmp/out.txt")
[ "$run_all" -ge "$n" ] || fail "plateau run --all-processes printed $run_all process blocks of $n"
all=$("$P" report --all-processes "$tmp/run" | grep -c "^process ")
[ "$all" -ge "$n" ] || fail "--all-processes shows $all process blocks of $n"
echo "ok: $n processes, $lines report lines, leads with python3 train.py, helpers on one line"
