#!/bin/sh
# Unit (generated traces, no preload): `plateau report` over the run directories of a two-node job. Node A holds
# rank 0 (flat), node B rank 1 (leaks 1 MiB/step); both ranks have pid 101 (pids collide across nodes).
#  - two directories with distinct ranks merge by themselves: one row per rank, the verdict names rank 1 on node-b;
#  - --compare still compares them, and two runs holding the same ranks (one job run twice) still compare;
#  - --merge with three directories, --json; --merge with --compare is refused (exit 2);
#  - one order of ranks: node-a holding ranks 1 and 0, node-b rank 0 (two processes of rank 0 on two nodes): the text's
#    rank rows, the JSON's and the HTML's table and side-by-side sections all list them by rank, then node.
# usage: test_merge.sh PLATEAU TEST_REPORT_GEN
set -eu
P=$1
G=$2
tmp=$(mktemp -d /tmp/pl-test-merge-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$tmp/a" "$tmp/b" "$tmp/b2" "$tmp/c"
"$G" "$tmp/a/101.0.pltrace" 0 160 0 node-a 101 || fail "gen a"
"$G" "$tmp/b/101.0.pltrace" 1048576 160 1 node-b 101 || fail "gen b"
"$G" "$tmp/b2/101.0.pltrace" 0 160 1 node-b 101 || fail "gen b2"
"$G" "$tmp/c/555.0.pltrace" 0 160 2 node-c 555 || fail "gen c"

"$P" report "$tmp/a" "$tmp/b" >"$tmp/m.txt" 2>"$tmp/m.err" || fail "merged report exit $?"
cat "$tmp/m.err" "$tmp/m.txt"
grep -q "hold distinct ranks of one job: merged" "$tmp/m.err" || fail "no merge note"
head -1 "$tmp/m.txt" | grep -q "^verdict: LEAK in rank 1 (pid 101, node node-b): +1.00 MiB/step of heap.bytes" ||
    fail "verdict does not name rank 1 on node-b"
grep -q "^ranks: 2 on 2 nodes: ranks disagree: rank 1 grows" "$tmp/m.txt" || fail "no rank disagreement"
grep -Eq "^ +0 +0 node-a +101 +160  no-leak" "$tmp/m.txt" || fail "no row for rank 0"
grep -Eq "^ +1 +1 node-b +101 +160  leak " "$tmp/m.txt" || fail "no row for rank 1"
grep -q "^call sites by live-byte growth (rank 1 on node-b, pid 101," "$tmp/m.txt" || fail "the sites do not name the rank"

# the same two directories compared on request: the comparison, no rank rows
"$P" report --compare "$tmp/a" "$tmp/b" >"$tmp/c.txt" 2>&1 || fail "compare exit $?"
grep -q "^ranks:" "$tmp/c.txt" && fail "--compare merged"
grep -q "merged" "$tmp/c.txt" && fail "--compare said merged"
grep -q "host allocator" "$tmp/c.txt" || fail "--compare did not compare"
# one job run twice (the same ranks): compared, as before
"$P" report "$tmp/b" "$tmp/b2" >"$tmp/c2.txt" 2>&1 || fail "compare of reruns exit $?"
grep -q "host allocator" "$tmp/c2.txt" || fail "two runs of the same ranks were not compared"
grep -q "merged" "$tmp/c2.txt" && fail "two runs of the same ranks were merged"

# three directories merge, JSON rows keyed by node
"$P" report --merge "$tmp/a" "$tmp/b" "$tmp/c" --json "$tmp/m.json" >/dev/null || fail "merge of three exit $?"
python3 - "$tmp/m.json" <<'PY' || fail "merged JSON"
import json, sys
d = json.load(open(sys.argv[1]))
rk = d["run"]["ranks"]
assert rk["n_ranks"] == 3 and rk["n_nodes"] == 3 and rk["agree"] is False, rk
assert rk["leaking"] == [1] and rk["flat"] == [0, 2], rk
assert [(r["rank"], r["node"], r["pid"]) for r in rk["rows"]] == [(0, "node-a", 101), (1, "node-b", 101), (2, "node-c", 555)], rk
assert "+2 more run directories merged" in d["source"], d["source"]
assert d["verdict"]["line"].startswith("verdict: LEAK in rank 1 (pid 101, node node-b)"), d["verdict"]
PY
# one order of ranks in the three outputs: (0, node-a), (0, node-b), (1, node-a), whatever the rows' order
mkdir "$tmp/ra" "$tmp/rb"
"$G" "$tmp/ra/301.0.pltrace" 0 160 1 node-a 301 || fail "gen ra 301"
"$G" "$tmp/ra/302.0.pltrace" 1048576 160 0 node-a 302 || fail "gen ra 302"
"$G" "$tmp/rb/301.0.pltrace" 0 160 0 node-b 301 || fail "gen rb 301"
"$P" report --merge "$tmp/ra" "$tmp/rb" --json "$tmp/r.json" --html "$tmp/r.html" >"$tmp/r.txt" 2>&1 ||
    fail "merge of shared ranks exit $?"
python3 - "$tmp/r.txt" "$tmp/r.json" "$tmp/r.html" <<'PY' || fail "the outputs order the ranks differently"
import json, re, sys
want = [(0, "node-a"), (0, "node-b"), (1, "node-a")]
text = [(int(m.group(1)), m.group(2)) for m in re.finditer(r"^ +(\d+) +\d+ +(node-\w) +\d+ +160 ", open(sys.argv[1]).read(), re.M)]
assert text == want, ("text", text)
rows = json.load(open(sys.argv[2]))["run"]["ranks"]["rows"]
assert [(r["rank"], r["node"]) for r in rows] == want, ("json", rows)
html = open(sys.argv[3]).read()
table = [(int(a), b) for a, b in re.findall(r'<tr><td class="num">(\d+)</td><td class="num">[^<]*</td><td>([^<]*)', html)]
assert table == want, ("html table", table)
cols = [(int(a), b) for a, b in re.findall(r'<div class="col">\n<h2>Process \d+ [^<(]*\(rank (\d+), node ([^)]*)\)', html)]
assert cols == want, ("html sections", cols)
PY
set +e
"$P" report --merge --compare "$tmp/a" "$tmp/b" >/dev/null 2>"$tmp/e.txt"
[ $? -eq 2 ] || fail "--merge --compare not refused"
grep -q "exclude each other" "$tmp/e.txt" || fail "no message for --merge --compare"
"$P" report --compare "$tmp/a" "$tmp/b" "$tmp/c" >/dev/null 2>&1
[ $? -eq 2 ] || fail "--compare with three runs not refused"
echo "OK"
