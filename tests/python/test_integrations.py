#!/usr/bin/env python3
"""The python.pytest_*, python.prometheus and python.loggers tests: where users look (docs/pytest.md, docs/live.md,
docs/python.md "Loggers").

Usage: test_integrations.py MODE [ARGS]   (meson passes the paths in the environment, see tests/python/meson.build)
  pytest_plugin       plateau's pytest plugin over tests/python/pytest_bodies: the leaking bodies (pure Python,
                      torch 1.13) fail with the LEAK line, the plateauing ones pass, 40 steps of a leak and 80 of a
                      cache filling over 64 calls are not decided (skipped with the steps that would decide; failed
                      with undecided="fail"), a body that
                      raises at its 5th call fails with its own error, an unmarked test is not traced unless
                      --plateau, a bad marker fails in one line
  pytest_repeat N     the four bodies N times over: the same outcome every time (the plugin does not flake)
  prometheus          plateau watch --prometheus FILE on tests/targets/warmleak.c while it runs, each version of
                      FILE parsed by prometheus_client: warming_up, then leak with a rate and a projected OOM while
                      the run goes on, the step moving between refreshes, run_ended at the end, no temporary file
                      left; plateau run's own DIR/live.prom; an unwritable FILE ends the watch in one line
  loggers             a leaking torch loop with plateau.TrainerCallback under plateau run --live, configured like a
                      Trainer with report_to=["tensorboard", "wandb"] (W&B offline): the event file read back with
                      tensorboard's EventAccumulator and the W&B run's history (its transaction log) have plateau's
                      per-step memory at every step and the live verdict, LEAK by the end (20 steps before the
                      end the loop waits until the watcher has published LEAK: a hand-off, not a timing)
  lightning_loggers   a real Lightning 2 Trainer (the framework venv `make framework-venv` makes) with a CSVLogger
                      and plateau.LightningCallback(), leaking 256 KiB per step under plateau run --live: the
                      logger's metrics.csv has plateau's RSS every log_every_n_steps and the verdict, LEAK by the end
                      (the same hand-off)
They run the interpreter of the venv `make integrations-venv` makes (PL_INTEGRATIONS_VENV,
tests/python/integrations.txt), and skip with the reason where it is missing.
Exit 77 = skipped (the reason is printed).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

PLATEAU = os.environ["PL_PLATEAU"]
SRC = os.environ["PL_SRC"]
PYDIR = os.environ["PL_PYTHON_DIR"]       # build/python: the plateau package
VENV = os.environ.get("PL_INTEGRATIONS_VENV", "")
BODIES = os.path.join(SRC, "tests", "python", "pytest_bodies")
SKIP = 77


def venv_python(*modules):
    """The integrations venv's interpreter, or exit 77 saying why it is not there or lacks a module."""
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        failed = VENV + ".failed"
        why = open(failed).read().strip() if os.path.exists(failed) else "not made (make integrations-venv)"
        print(f"skip: no {py}: {why}")
        sys.exit(SKIP)
    for m in modules:
        r = subprocess.run([py, "-c", f"import {m}"], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"skip: {py} cannot import {m}: {r.stderr.strip().splitlines()[-1:]}")
            sys.exit(SKIP)
    return py


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLATEAU_") and k != "PYTHONPATH"}
    env.update(extra)
    return env


# ------------------------------------------------------------------------------------------------ pytest

def run_pytest(py, tmp, args, name):
    """pytest with plateau's plugin over a copy of the bodies in tmp: {test name: (outcome, message)}, the output."""
    work = os.path.join(tmp, name)
    shutil.copytree(BODIES, work, ignore=shutil.ignore_patterns("__pycache__"))
    xml = os.path.join(work, "junit.xml")
    cmd = [py, "-m", "pytest", "-p", "plateau.pytest_plugin", "-p", "no:cacheprovider", "--plateau-exe", PLATEAU,
           "-rA", "--junitxml", xml] + args
    t0 = time.monotonic()
    runs = os.path.join(tmp, name + "-runs")  # the run directories the plugin keeps (TMPDIR): removed with tmp
    os.mkdir(runs)
    r = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=900,
                       env=clean_env(PYTHONPATH=PYDIR, TMPDIR=runs))
    took = time.monotonic() - t0
    assert os.path.exists(xml), f"{name}: pytest wrote no junit xml (exit {r.returncode}):\n{r.stdout}\n{r.stderr}"
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome, msg = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                msg = (child.get("message") or "") + "\n" + (child.text or "")
        out[case.get("name")] = (outcome, msg)
    return out, r.stdout + r.stderr, took


def expect(results, name, outcome, *texts):
    got, msg = results.get(name, ("missing", ""))
    assert got == outcome, f"{name}: {got}, expected {outcome}:\n{msg}"
    for t in texts:
        assert t in msg, f"{name}: {outcome} without {t!r}:\n{msg}"
    first = next((line for line in msg.splitlines() if "plateau" in line or "body broke" in line), "")
    print(f"ok: {name}: {outcome}{': ' + first.strip()[:160] if first else ''}")


BODY_OUTCOMES = [("test_leak_py", "failed", "LEAK"), ("test_plateau_py", "passed", None),
                 ("test_leak_torch", "failed", "LEAK"), ("test_plateau_torch", "passed", None)]


def mode_pytest_plugin(argv):
    py = venv_python("pytest", "torch")
    with tempfile.TemporaryDirectory(prefix="pl-pytest-") as tmp:
        res, out, took = run_pytest(py, tmp, ["test_plateau_bodies.py"], "bodies")
        print(f"bodies: {took:.1f} s")
        for name, outcome, text in BODY_OUTCOMES:
            expect(res, name, outcome, *([text, "over 200 steps of the test body", "plateau report "]
                                         if text else []))
        # the passing ones say their verdict in the report's plateau section (-rA)
        assert "verdict: no leak" in out, f"no 'verdict: no leak' in the passing tests' sections:\n{out}"
        res, out, took = run_pytest(py, tmp, ["test_plugin_edges.py"], "edges")
        expect(res, "test_short_leak", "skipped", "not decided after 40 steps", "more steps: @pytest.mark.plateau(steps=")
        expect(res, "test_short_leak_strict", "failed", "not decided after 40 steps")
        # a cache filling over 64 calls, judged at 80: its first call's jump is not taken for the end of a warmup
        # (the judged steps start at the second call), so it is not decided yet, never a leak
        expect(res, "test_cache_still_warming", "skipped", "not decided after 80 steps")
        expect(res, "test_fails_at_step_5", "failed", "body broke at call 5", "raised at step 5 of 20")
        expect(res, "test_untraced", "passed")
        expect(res, "test_bad_marker", "failed", "has no option stepz")
        # --plateau traces the unmarked test too (and --plateau-steps gives it enough steps to decide)
        res, out, took = run_pytest(py, tmp, ["test_plugin_edges.py", "-k", "untraced", "--plateau",
                                              "--plateau-steps", "200"], "all")
        expect(res, "test_untraced", "failed", "LEAK", "over 200 steps")


def mode_pytest_repeat(argv):
    n = int(argv[0]) if argv else 5
    py = venv_python("pytest", "torch")
    seen = {name: [] for name, _, _ in BODY_OUTCOMES}
    with tempfile.TemporaryDirectory(prefix="pl-pytest-rep-") as tmp:
        for i in range(n):
            res, out, took = run_pytest(py, tmp, ["test_plateau_bodies.py"], f"run{i}")
            for name, _, _ in BODY_OUTCOMES:
                seen[name].append(res.get(name, ("missing", ""))[0])
            print(f"run {i + 1}/{n}: {took:.1f} s: " + ", ".join(f"{k} {v[-1]}" for k, v in seen.items()))
    for name, outcome, _ in BODY_OUTCOMES:
        assert seen[name] == [outcome] * n, f"{name}: {seen[name]}, expected {outcome} every time"
    print(f"ok: {n} runs of the 4 bodies, the same outcome every time")


# ------------------------------------------------------------------------------------------------ prometheus

def wait_for(what, pred, timeout=120):
    """Poll pred() every 50 ms until it returns a true value (a hang guard, not a timing)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def parse_prom(path):
    """The file parsed by prometheus_client: {(name, frozenset(labels)): value}, or None when absent."""
    from prometheus_client.parser import text_string_to_metric_families
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    out = {}
    for fam in text_string_to_metric_families(text):
        assert fam.type == "gauge", f"{fam.name}: {fam.type}"
        for smp in fam.samples:
            out[(smp.name, frozenset(smp.labels.items()))] = smp.value
    return out


def prom_get(vals, name, **labels):
    """The one sample of `name` whose labels include `labels`."""
    hits = [v for (n, ls), v in vals.items() if n == name and set(labels.items()) <= set(ls)]
    assert len(hits) == 1, f"{name} {labels}: {len(hits)} samples"
    return hits[0]


def prom_state(vals, pid):
    on = [dict(ls)["state"] for (n, ls), v in vals.items()
          if n == "plateau_verdict" and dict(ls)["pid"] == pid and v == 1]
    assert len(on) <= 1, on
    return on[0] if on else None


def prom_pids(vals):
    return sorted({dict(ls)["pid"] for (n, ls) in vals if n == "plateau_step"})


def mode_prometheus(argv):
    py = venv_python("prometheus_client")
    if os.path.realpath(sys.executable) != os.path.realpath(py) and not os.environ.get("PL_IN_VENV"):
        # the parser runs in this process: this mode again, with the venv's interpreter
        r = subprocess.run([py, os.path.abspath(__file__), "prometheus"] + argv, env=dict(os.environ, PL_IN_VENV="1"))
        sys.exit(r.returncode)
    warmleak = os.path.join(os.environ["PL_TARGETS"], "target_warmleak")
    with tempfile.TemporaryDirectory(prefix="pl-prom-") as tmp:
        d, prom = os.path.join(tmp, "run"), os.path.join(tmp, "textfile", "plateau.prom")
        os.mkdir(d)
        os.mkdir(os.path.dirname(prom))
        go, end = os.path.join(tmp, "go"), os.path.join(tmp, "end")
        run = subprocess.Popen([PLATEAU, "run", "--no-report", "--live", "--live-interval", "0.2", "-o", d, "--",
                                warmleak, "30", "400", go, end], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=clean_env())
        watch = subprocess.Popen([PLATEAU, "watch", "--interval", "0.2", "--prometheus", prom, d],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=clean_env())
        try:
            def state(want):
                def pred():
                    v = parse_prom(prom)
                    return v if v and prom_pids(v) and prom_state(v, prom_pids(v)[0]) == want else None
                return pred
            v = wait_for("warming_up in the textfile", state("warming_up"))
            (pid,) = prom_pids(v)
            assert prom_get(v, "plateau_run_ended") == 0
            more = prom_get(v, "plateau_more_steps", pid=pid, metric="heap")
            assert more > 0
            print(f"ok: pid {pid} warming_up at step {prom_get(v, 'plateau_step', pid=pid):.0f}, {more:.0f} more steps")
            open(go, "w").close()
            v = wait_for("leak in the textfile", state("leak"))
            assert prom_get(v, "plateau_run_ended") == 0, "leak seen only after the run ended"
            rate = prom_get(v, "plateau_growth_bytes_per_step", pid=pid, metric="heap")
            assert 60e3 < rate < 70e3, f"heap growth {rate} B/step, the target keeps 64 KiB/step"
            oom = prom_get(v, "plateau_oom_seconds", pid=pid, metric="heap")
            step1 = prom_get(v, "plateau_step", pid=pid)
            assert oom > 0 and prom_get(v, "plateau_oom_step", pid=pid, metric="heap") > step1
            assert prom_get(v, "plateau_growth_bytes_per_second", pid=pid, metric="heap") > rate
            print(f"ok: leak at step {step1:.0f}: {rate:.0f} B/step, OOM in {oom:.0f} s")

            def later():
                x = parse_prom(prom)
                return x if x and prom_get(x, "plateau_step", pid=pid) > step1 else None
            v2 = wait_for("a later step", later)
            print(f"ok: refreshed: step {step1:.0f} -> {prom_get(v2, 'plateau_step', pid=pid):.0f}")
            own = parse_prom(os.path.join(d, "live.prom"))  # plateau run's own copy, for the callbacks
            assert own and prom_state(own, pid) in ("leak", "leak_suspected"), own
            print(f"ok: plateau run's RUN_DIR/live.prom: {prom_state(own, pid)}")
            open(end, "w").close()
            assert run.wait(timeout=120) == 0
            assert watch.wait(timeout=120) == 0, watch.stderr.read()
        finally:
            for p in (run, watch):
                if p.poll() is None:
                    p.kill()
                    p.wait()
        v = parse_prom(prom)
        assert prom_get(v, "plateau_run_ended") == 1 and prom_state(v, pid) == "leak", v
        left = [f for f in os.listdir(os.path.dirname(prom)) if f != "plateau.prom"]
        assert not left, f"left in the textfile directory: {left}"
        print("ok: run_ended 1 at the end, verdict leak, nothing else in the directory")
        r = subprocess.run([PLATEAU, "watch", "--once", "--prometheus", os.path.join(tmp, "nodir", "x.prom"), d],
                           capture_output=True, text=True, env=clean_env())
        lines = r.stderr.splitlines()
        assert r.returncode == 1 and len(lines) == 1 and "cannot write" in lines[0], (r.returncode, r.stderr)
        print(f"ok: an unwritable FILE: exit 1, {lines[0]}")


# ------------------------------------------------------------------------------------------------ loggers

LOGGERS_SCRIPT = """import os, sys, time, types
import torch
import wandb
import plateau
out, steps = sys.argv[1], int(sys.argv[2])
wandb.init(mode="offline", dir=out, project="plateau-test")
# a transformers Trainer's TrainingArguments as the callback reads them (transformers is not in this venv)
args = types.SimpleNamespace(report_to=["tensorboard", "wandb"], logging_dir=os.path.join(out, "tb"),
                             logging_steps=1, logging_strategy="steps")
state = types.SimpleNamespace(global_step=0, epoch=0)
cb = plateau.TrainerCallback()
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []


def wait_for_leak():  # a hand-off, not a timing: until the watcher has published LEAK for this process
    from plateau import _loggers
    live, t0 = _loggers.Live(), time.monotonic()
    while live.values().get("plateau/verdict") != 6:
        if time.monotonic() - t0 > 120:
            sys.exit("loggers_train.py: no LEAK in the live verdict after 120 s")
        time.sleep(0.05)


for i in range(steps):
    if i == steps - 20:
        wait_for_leak()
    opt.zero_grad()
    model(torch.randn(16, 64)).sum().backward()
    opt.step()
    kept.append(torch.ones(64 * 1024))  # 256 KiB kept per step
    state.global_step = i + 1
    cb.on_step_end(args, state, None)
    time.sleep(0.01)
cb.on_train_end(args, state, None)
wandb.finish()
print("loggers script done", len(kept))
"""

TB_READ = """import sys, json
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
ea.Reload()
print(json.dumps({t: [(e.step, e.value) for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}))
"""


# The history rows of a W&B offline run, one JSON object a line, read from its transaction log (run-ID.wandb): a
# 7-byte header (":W&B", magic, version), then LevelDB-log blocks of 32 KiB whose records carry a 7-byte header
# (CRC-32C, length, type: 1 full, 2 first, 3 middle, 4 last), each a wandb_internal_pb2.Record.
WANDB_READ = """import json, struct, sys
from wandb.proto import wandb_internal_pb2
data = open(sys.argv[1], "rb").read()
assert data[:4] == b":W&B", data[:7]
off, buf = 7, b""
while off + 7 <= len(data):
    left = 32768 - off % 32768
    if left < 7:
        off += left
        continue
    crc, n, kind = struct.unpack("<IHB", data[off:off + 7])
    if n == 0 and kind == 0:
        off += left
        continue
    chunk = data[off + 7:off + 7 + n]
    off += 7 + n
    buf = chunk if kind in (1, 2) else buf + chunk
    if kind in (1, 4):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(buf)
        if rec.WhichOneof("record_type") == "history":
            print(json.dumps({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.history.item}))
"""


def mode_loggers(argv):
    import glob
    import json
    py = venv_python("torch", "tensorboard", "wandb")
    steps = 400
    with tempfile.TemporaryDirectory(prefix="pl-loggers-") as tmp:
        script = os.path.join(tmp, "loggers_train.py")
        with open(script, "w") as f:
            f.write(LOGGERS_SCRIPT)
        d, out = os.path.join(tmp, "run"), os.path.join(tmp, "out")
        os.mkdir(out)
        env = clean_env(PYTHONPATH=PYDIR, WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=out,
                        WANDB_CONFIG_DIR=os.path.join(tmp, "wandbcfg"), WANDB_CACHE_DIR=os.path.join(tmp, "wbc"))
        r = subprocess.run([PLATEAU, "run", "--no-report", "--live", "--live-interval", "0.2", "-o", d, "--", py,
                            script, out, str(steps)], capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0 and "loggers script done" in r.stdout, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        assert os.path.isdir(os.path.join(out, "tb")), "no TensorBoard event file: the callback logged nothing"
        r = subprocess.run([py, "-c", TB_READ, os.path.join(out, "tb")], capture_output=True, text=True,
                           env=clean_env())
        assert r.returncode == 0, r.stderr
        tb = json.loads(r.stdout.strip().splitlines()[-1])
        rss = tb.get("plateau/rss_bytes", [])
        assert [s for s, _ in rss] == list(range(1, steps + 1)), f"rss_bytes at steps {[s for s, _ in rss][:10]}"
        assert rss[-1][1] > rss[0][1] + 50e6, f"RSS {rss[0][1]} -> {rss[-1][1]}: the loop keeps 100 MiB"
        verdict = tb.get("plateau/verdict", [])
        assert verdict and all(0 <= v <= 6 for _, v in verdict), verdict[:5]
        assert verdict[-1][1] == 6, f"last verdict code {verdict[-1][1]}, not 6 (LEAK): {verdict[-20:]}"
        growth = tb.get("plateau/heap_growth_bytes_per_step", [])
        assert growth and 230e3 < growth[-1][1] < 290e3, f"heap growth {growth[-3:]}, the loop keeps 256 KiB/step"
        first_leak = next(s for s, v in verdict if v == 6)
        print(f"ok: TensorBoard: {len(rss)} rss_bytes points ({rss[0][1] / 2**20:.0f} -> {rss[-1][1] / 2**20:.0f} "
              f"MiB), verdict codes {sorted(set(v for _, v in verdict))}, LEAK from step {first_leak}, heap growth "
              f"{growth[-1][1] / 1024:.0f} KiB/step")
        runs = glob.glob(os.path.join(out, "wandb", "offline-run-*", "run-*.wandb"))
        assert len(runs) == 1, f"W&B offline runs: {runs}"
        r = subprocess.run([py, "-c", WANDB_READ, runs[0]], capture_output=True, text=True, env=clean_env())
        assert r.returncode == 0, r.stderr
        hist = [json.loads(line) for line in r.stdout.splitlines()]
        ours = [h for h in hist if "plateau/rss_bytes" in h]
        assert [h["train/global_step"] for h in ours] == list(range(1, steps + 1)), \
            f"W&B: plateau rows at global steps {[h.get('train/global_step') for h in ours][:10]}"
        codes = [h.get("plateau/verdict") for h in ours]
        assert codes[-1] == 6, f"W&B: last verdict code {codes[-1]}: {codes[-20:]}"
        wgrowth = ours[-1].get("plateau/heap_growth_bytes_per_step", 0)
        assert 230e3 < wgrowth < 290e3, f"W&B: heap growth {wgrowth}"
        print(f"ok: W&B offline run ({os.path.basename(runs[0])}, read back from its transaction log): {len(ours)} "
              f"plateau rows at train/global_step 1..{steps}, verdict codes {sorted(set(c for c in codes if c is not None))}"
              f", last 6 (LEAK), heap growth {wgrowth / 1024:.0f} KiB/step")


def mode_lightning_loggers(argv):
    """A real Lightning Trainer's CSVLogger gets plateau's scalars every log_every_n_steps (the framework venv, over
    Debian's torch: tests/python/frameworks.txt)."""
    import csv
    fw = os.environ.get("PL_FRAMEWORK_VENV", "")
    py = os.path.join(fw, "bin", "python")
    if not os.path.exists(os.path.join(fw, ".stamp")):
        failed = fw + ".failed"
        why = open(failed).read().strip() if os.path.exists(failed) else "not made (make framework-venv)"
        print(f"skip: no framework venv {fw}: {why}")
        sys.exit(SKIP)
    steps = 300
    with tempfile.TemporaryDirectory(prefix="pl-lightning-log-") as tmp:
        d, out = os.path.join(tmp, "run"), os.path.join(tmp, "out")
        r = subprocess.run([PLATEAU, "run", "--no-report", "--live", "--live-interval", "0.2", "-o", d, "--", py,
                            os.path.join(SRC, "tests", "python", "lightning_loggers.py"), out, str(steps)],
                           capture_output=True, text=True, timeout=600, env=clean_env(PYTHONPATH=PYDIR))
        assert r.returncode == 0 and f"global_step {steps}" in r.stdout, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        with open(os.path.join(out, "csv", "version_0", "metrics.csv")) as f:
            rows = [row for row in csv.DictReader(f) if row.get("plateau/rss_bytes")]
        got = [int(row["step"]) for row in rows]
        assert got == list(range(5, steps + 1, 5)), f"plateau rows at steps {got}"
        rss = [float(row["plateau/rss_bytes"]) for row in rows]
        assert rss[-1] > rss[0] + 40e6, f"RSS {rss[0]} -> {rss[-1]}: the module keeps 75 MiB"
        codes = [float(row["plateau/verdict"]) for row in rows if row.get("plateau/verdict")]
        assert codes and codes[-1] == 6, f"last verdict code {codes[-1:]}, not 6 (LEAK): {codes}"
        print(f"ok: Lightning's CSVLogger: plateau rows at steps 5..{steps} every 5, RSS {rss[0] / 2**20:.0f} -> "
              f"{rss[-1] / 2**20:.0f} MiB, verdict codes {sorted(set(codes))}, last 6 (LEAK)")


MODES = {"pytest_plugin": mode_pytest_plugin, "pytest_repeat": mode_pytest_repeat, "prometheus": mode_prometheus,
         "loggers": mode_loggers, "lightning_loggers": mode_lightning_loggers}

if __name__ == "__main__":
    MODES[sys.argv[1]](sys.argv[2:])
