#!/usr/bin/env python3
"""The torch2.* tests: plateau's Python side on PyPI's real torch 2 (tests/python/torch2.txt), CPU only.

The venv is made by `make test-torch2` (tests/python/torch2-venv.sh): PL_TORCH2_VENV names it. Without it (no
network when it was to be made) every test exits 77 with the reason the script wrote to VENV.failed.
Usage: test_torch2.py MODE [ARGS]   (meson passes the paths in the environment, see tests/python/meson.build)
  steps N [TRAIN ARGS]   tests/python/train.py under plateau run: the trace's steps are the optimizer's (torch 2's
                         global post-step hook, source 3), exactly N, and the report counts N without detection.
                         TRAIN ARGS as train.py's: --accum K, --gan (two optimizers), --scheduler, --scaler-skip
                         I,J (GradScaler skips those iterations' steps: N excludes them), --compile [BACKEND].
                         Without TRAIN ARGS also: the bootstrap's hook is in torch's global post-hook table, and
                         _optimizer_step_code (1.13's path, still in torch 2) is left unwrapped
  tensors                live tensors at every step (PLATEAU_TENSOR_BUDGET=1) on torch 2; 3 kept tensors per step
                         are a tensors leak of +3/step with the retained-tensors finding
  ranks                  torch 2's own torchrun, unmodified, 2 ranks over gloo (tests/targets/torch_ranks.py): only
                         rank 1 leaks: the verdict names rank 1, rank 0 is flat
  memory_viz             plateau report --torch-snapshot of a run with device events, read by torch 2's
                         torch.cuda._memory_viz (pure Python: segsum, trace, segment and trace plots)
  allocator              plateau.torch.use_allocator() on the real torch 2 without a GPU: False and its one line
                         ("torch sees no CUDA device"), the program runs on; torch 2's own CUDAPluggableAllocator
                         loads libplateau_alloc.so by the entry point names use_allocator() passes, and
                         change_current_allocator() takes it (what the stand-in of python.torch_allocator mimics)
  venv_offline           tests/python/torch2-venv.sh with no index and no cached wheel (no network): exit 0, no half
                         venv, one line naming the problem, and the tests above skip printing it
  tune_snapshot          snapshot pickles in torch 2's layout (tests/fixtures/snapshots, and our export) read both
                         by torch 2's _memory_viz and by plateau tune, with the same counts
Exit 77 = skipped (the reason is printed).
"""
import glob
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile

PLATEAU = os.environ["PL_PLATEAU"]
TRACE_STEPS = os.environ["PL_TRACE_STEPS"]
SRC = os.environ["PL_SRC"]
TARGETS = os.environ["PL_TARGETS"]              # build/tests/targets: target_marks
VENV = os.environ["PL_TORCH2_VENV"]
PY = os.path.join(VENV, "bin", "python")
TRAIN = os.path.join(SRC, "tests", "python", "train.py")
STANDIN = os.path.join(SRC, "tests", "python", "cuda_standin.py")
RANKS = os.path.join(SRC, "tests", "targets", "torch_ranks.py")
SNAPSHOTS = os.path.join(SRC, "tests", "fixtures", "snapshots")
SKIP = 77


def need_venv():
    if not os.path.exists(os.path.join(VENV, ".stamp")):
        why = ""
        if os.path.exists(VENV + ".failed"):
            with open(VENV + ".failed") as f:
                why = f.read().strip()
        print(f"skip: no torch 2 venv at {VENV} ({why or 'run make test-torch2'})")
        sys.exit(SKIP)
    r = subprocess.run([PY, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("2."), f"the venv's torch: {r.stdout} {r.stderr}"
    return r.stdout.strip()


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLATEAU_") and k != "PYTHONPATH"}
    env.update(extra)
    return env


def plateau_run(tmp, name, cmd, env=None):
    d = os.path.join(tmp, name)
    r = subprocess.run([PLATEAU, "run", "--no-report", "-o", d, "--"] + cmd, capture_output=True, text=True,
                       timeout=400, env=env if env is not None else clean_env())
    assert r.returncode == 0, f"{name}: plateau run exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return d, r


def report(d, name):
    j = d + ".json"
    r = subprocess.run([PLATEAU, "report", d, "--json", j], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{name}: plateau report exited {r.returncode}\n{r.stderr}"
    with open(j) as f:
        return json.load(f), r.stdout


def process(rep, script):
    procs = [p for p in rep["run"]["processes"] if script in p["argv"]]
    assert len(procs) == 1, f"expected one process running {script}: {[p['argv'] for p in rep['run']['processes']]}"
    return procs[0]


def trace_rows(d, script):
    files = sorted(glob.glob(os.path.join(d, "*.pltrace")))
    out = subprocess.run([TRACE_STEPS] + files, capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    return [row for row in rows if any(script in a for a in row["argv"])]


def mode_steps(argv):
    version = need_venv()
    n, args = int(argv[0]), argv[1:]
    iters = n + len([i for i in args[args.index("--scaler-skip") + 1].split(",") if i]) \
        if "--scaler-skip" in args else n
    with tempfile.TemporaryDirectory(prefix="pl-torch2-steps-") as tmp:
        # torch.compile: inductor's cache in a fresh directory, so every run compiles (as a first run in CI does)
        env = clean_env(TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"))
        d, r = plateau_run(tmp, "steps", [PY, TRAIN, "--steps", str(iters)] + args, env=env)
        print(r.stdout.strip())
        if "--compile" in args:  # inductor compiled and cached kernels: the compiled model ran, not eager
            kernels = [f for _, _, fs in os.walk(os.path.join(tmp, "inductor")) for f in fs if f.endswith(".so")]
            assert kernels, f"torch.compile left no compiled kernel in {os.path.join(tmp, 'inductor')}"
            print(f"torch.compile: {len(kernels)} compiled kernel libraries")
        calls = int(r.stdout.split("iterations, ")[1].split()[0])
        want = n * 2 if "--gan" in args else n  # train.py's own count of optimizer.step() calls that ran
        assert calls == want, f"train.py ran {calls} optimizer steps, the test expects {want}"
        (row,) = trace_rows(d, "train.py")
        assert row["steps_optimizer"] == n and row["steps_api"] == 0, f"trace: {row} (want {n} optimizer steps)"
        rep, text = report(d, "steps")
        proc = process(rep, "train.py")
        assert f"pid {proc['pid']}: steps auto-detected" not in text, "the report fell back to period detection"
        assert proc["steps"] == n, f"the report has {proc['steps']} steps for {n} optimizer steps"
        print(f"ok: torch {version}, train.py {' '.join(args) or '(plain)'}: {n} steps from the global post-step "
              f"hook for {iters} iterations")
        if not args:
            check_hook(tmp, version)


HOOK_PROBE = r"""import json, torch
import torch.optim.optimizer as o
hooks = [getattr(h, "__module__", "?") + "." + getattr(h, "__name__", "?")
         for h in getattr(o, "_global_optimizer_post_hooks", {}).values()]
print(json.dumps({"hooks": hooks, "step_code_wrapped": hasattr(o.Optimizer._optimizer_step_code, "__wrapped__")}))
"""


def check_hook(tmp, version):
    """Which path counts the steps: torch 2 still has 1.13's _optimizer_step_code too, so exact steps alone do not
    tell. The bootstrap must have registered its global post hook and left _optimizer_step_code alone."""
    prog = os.path.join(tmp, "probe.py")
    with open(prog, "w") as f:
        f.write(HOOK_PROBE)
    d, r = plateau_run(tmp, "probe", [PY, prog])
    got = json.loads(r.stdout.strip().splitlines()[-1])
    # the bootstrap's package runs under its private name (docs/python.md), never as a `plateau` a user could own
    assert got == {"hooks": ["_plateau_bootstrap._steps._post_hook"], "step_code_wrapped": False}, got
    print(f"ok: torch {version}: the bootstrap registered _plateau_bootstrap._steps._post_hook as the global post-step hook "
          f"and left Optimizer._optimizer_step_code alone")


def codes(proc):
    return [x["code"] for x in proc["diagnosis"]]


def metrics(proc):
    return {m["name"]: m for m in proc["metrics"]}


def judged(rep, script):
    """The report's judged row (metrics, diagnosis) of the one process running `script`."""
    rows = [p for p in rep["processes"] if script in p["name"]]
    assert len(rows) == 1, f"expected one row for {script}: {[p['name'] for p in rep['processes']]}"
    return rows[0]


def mode_tensors(argv):
    version = need_venv()
    with tempfile.TemporaryDirectory(prefix="pl-torch2-tensors-") as tmp:
        d, _ = plateau_run(tmp, "every", [PY, TRAIN, "--steps", "12"], env=clean_env(PLATEAU_TENSOR_BUDGET="1"))
        rep, _ = report(d, "every")
        t = metrics(judged(rep, "train.py")).get("tensors")
        assert t and [p[0] for p in t["series"]] == list(range(1, 13)), t and t["series"]
        assert all(p[1] >= 10 for p in t["series"]), t["series"]  # the 10 parameters of G and D at least
        print(f"ok: torch {version}: live tensors at every step of train.py: {[p[1] for p in t['series']]}")
        d, _ = plateau_run(tmp, "kept", [PY, STANDIN, "--mode", "flat", "--steps", "160", "--tensors", "3"],
                           env=clean_env(PLATEAU_TENSOR_BUDGET="1"))
        rep, _ = report(d, "kept")
        proc = judged(rep, "cuda_standin.py")
        t = metrics(proc)["tensors"]
        assert t["verdict"] == "leak" and t["leak"]["per_step"] == 3, (t["verdict"], t.get("leak"))
        assert "retained-tensors" in codes(proc), codes(proc)
        print("ok: 3 tensors kept per step: tensors leak +3/step, retained tensors")


def mode_ranks(argv):
    version = need_venv()
    with tempfile.TemporaryDirectory(prefix="pl-torch2-ranks-") as tmp:
        torchrun = os.path.join(VENV, "bin", "torchrun")
        d, r = plateau_run(tmp, "leak", [torchrun, "--standalone", "--nproc_per_node", "2", RANKS, "--leak-rank",
                                         "1", "--leak-kib", "1024", "--steps", "200"])
        for rank in (0, 1):
            assert f"rank {rank} done" in r.stdout, f"rank {rank} did not finish\n{r.stdout}\n{r.stderr}"
        rep, text = report(d, "leak")
        rk = rep["run"]["ranks"]
        assert rk is not None and rk["n_ranks"] == 2 and [x["rank"] for x in rk["rows"]] == [0, 1], rk
        r1 = rk["rows"][1]
        first = text.splitlines()[0]
        want = f"verdict: LEAK in rank 1 (pid {r1['pid']}, node {r1['node']}): +"
        assert first.startswith(want), f"the verdict does not name rank 1: {first!r}, want {want!r}"
        assert rk["rows"][0]["verdict"] == "no-leak", f"rank 0 is not flat: {rk['rows'][0]}"
        assert rk["leaking"] == [1] and rk["flat"] == [0], rk
        with open(RANKS) as f:
            leak = [n for n, line in enumerate(f, 1) if "# LEAK" in line][0]
        assert f"allocated at torch_ranks.py:{leak} " in first, f"the leak is not named at line {leak}: {first!r}"
        print(f"ok: torch {version}'s torchrun, 2 gloo ranks: {first}")


def memory_viz_reads(snap, tmp, name):
    """torch 2's _memory_viz on a snapshot dict: what each reader makes of it (it raises on a missing field)."""
    prog = r"""
import json, pickle, sys
from torch.cuda import _memory_viz as mv
snap = pickle.load(open(sys.argv[1], "rb"))
out = {"segsum": mv.segsum(snap), "trace": mv.trace(snap)}
out["segment_plot"] = len(mv.segment_plot(snap))
out["trace_plot"] = len(mv.trace_plot(snap))
print(json.dumps(out))
"""
    path = os.path.join(tmp, name + ".pickle")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=2)
    r = subprocess.run([PY, "-c", prog, path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{name}: torch 2's _memory_viz cannot read it:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.splitlines()[-1])


def mode_memory_viz(argv):
    version = need_venv()
    with tempfile.TemporaryDirectory(prefix="pl-torch2-viz-") as tmp:
        d = os.path.join(tmp, "run")
        r = subprocess.run([PLATEAU, "run", "--no-report", "-o", d, "--", os.path.join(TARGETS, "target_marks"),
                            "12"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        snap_path = os.path.join(tmp, "export.pickle")
        r = subprocess.run([PLATEAU, "report", d, "--torch-snapshot", snap_path], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        with open(snap_path, "rb") as f:
            snap = pickle.load(f)
        got = memory_viz_reads(snap, tmp, "export")
        live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
        assert len(live) == 12, live
        # trace: one line per device trace entry ("b = a[0:8.0KiB]" an alloc in segment a, "# free completed for
        # b" its free); segsum: one line per segment
        acts = [e["action"] for e in snap["device_traces"][0]]
        n_alloc, n_free = acts.count("alloc"), acts.count("free_completed")
        lines = got["trace"].splitlines()
        viz = (sum(1 for x in lines if re.match(r"^\w+ = \w+\[\d+:", x)),
               sum(1 for x in lines if x.startswith("# free completed for ")))
        assert (n_alloc, n_free) == (12 * 5, 12 * 4) and viz == (n_alloc, n_free), (n_alloc, n_free, viz, lines[:20])
        assert f"{len(acts)} entries" in got["trace"], lines[:3]
        seg = got["segsum"]
        assert len(snap["segments"]) >= 1 and seg.count("\n") >= len(snap["segments"]), seg
        assert got["segment_plot"] > 1000 and got["trace_plot"] > 1000, got
        print(f"ok: torch {version}'s _memory_viz reads our --torch-snapshot: segsum, trace ({n_alloc} allocs), "
              f"segment_plot and trace_plot ({got['segment_plot']} and {got['trace_plot']} bytes of HTML)")


def tune_counts(path):
    r = subprocess.run([PLATEAU, "tune", path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"plateau tune {path}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def mode_tune_snapshot(argv):
    version = need_venv()
    with tempfile.TemporaryDirectory(prefix="pl-torch2-tune-") as tmp:
        for name in ("basic", "frag"):
            path = os.path.join(SNAPSHOTS, name + ".pickle")
            with open(path, "rb") as f:
                snap = pickle.load(f)
            got = memory_viz_reads(snap, tmp, name)
            out = tune_counts(path)
            # tune replays one device (it says which); its counts are that device's trace entries
            m = re.search(r"device (\d+) of (\d+): (\d+) trace entries \((\d+) alloc, \d+ free_requested, "
                          r"(\d+) free_completed", out)
            assert m and int(m[2]) == len(snap["device_traces"]), f"{name}: tune's format line:\n{out}"
            acts = [e["action"] for e in snap["device_traces"][int(m[1])]]
            tr = [x for x in got["trace"].split("Device ")[1:] if x.startswith(m[1] + " ")]
            assert (int(m[3]), int(m[4]), int(m[5])) == (len(acts), acts.count("alloc"), acts.count("free_completed"))
            assert tr and f"{len(acts)} entries" in tr[0], (m[1], got["trace"][:300])
            print(f"ok: {name}.pickle: torch {version}'s _memory_viz reads it ({len(acts)} entries on device {m[1]},"
                  f" segment_plot {got['segment_plot']} bytes of HTML), and plateau tune replays the same "
                  f"{acts.count('alloc')} allocs and {acts.count('free_completed')} frees")


def mode_venv_offline(argv):
    script = os.path.join(SRC, "tests", "python", "torch2-venv.sh")
    with tempfile.TemporaryDirectory(prefix="pl-torch2-venv-") as tmp:
        venv, wheels = os.path.join(tmp, "venv"), os.path.join(tmp, "wheels")
        r = subprocess.run([script, venv, wheels], capture_output=True, text=True, timeout=200,
                           env=clean_env(PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1"))
        assert r.returncode == 0, f"torch2-venv.sh exited {r.returncode}\n{r.stderr}"
        assert not os.path.exists(venv), f"a half venv was left: {os.listdir(venv)}"
        with open(venv + ".failed") as f:
            failed = f.read()
        want = "pip download -r tests/python/torch2.txt failed (no network?)"
        assert failed.count("\n") == 1 and want in failed, failed
        assert r.stderr.startswith(failed), f"stderr does not open with the reason: {r.stderr}"
        assert os.listdir(wheels) == [], os.listdir(wheels)
        r = subprocess.run([sys.executable, __file__, "steps", "3"], capture_output=True, text=True,
                           env=clean_env(PL_TORCH2_VENV=venv))
        assert r.returncode == SKIP and failed.strip() in r.stdout, f"{r.returncode}\n{r.stdout}\n{r.stderr}"
        print(f"ok: torch2-venv.sh without network: exit 0, no venv, the tests skip saying: {failed.strip()}")


ALLOC_PROG = r"""import json, torch
import plateau.torch as pt
ok = pt.use_allocator()
from torch.cuda.memory import CUDAPluggableAllocator, change_current_allocator
path = pt.library_path()
change_current_allocator(CUDAPluggableAllocator(path, "plateau_torch_malloc", "plateau_torch_free"))
try:
    CUDAPluggableAllocator(path, "plateau_torch_nonexistent", "plateau_torch_free")
    missing = "loaded"
except AttributeError as e:
    missing = str(e)
x = torch.randn(64, 64)
print(json.dumps({"use_allocator": ok, "path": path, "stats": pt.memory_stats(), "missing": missing,
                  "cpu": float((x @ x.T).trace() > 0)}))
"""


def mode_allocator(argv):
    version = need_venv()
    with tempfile.TemporaryDirectory(prefix="pl-torch2-alloc-") as tmp:
        prog = os.path.join(tmp, "alloc.py")
        with open(prog, "w") as f:
            f.write(ALLOC_PROG)
        d, r = plateau_run(tmp, "alloc", [PY, prog])
        got = json.loads(r.stdout.strip().splitlines()[-1])
        lines = [x for x in r.stderr.splitlines() if x.startswith("plateau: plateau.torch.use_allocator(): ")]
        assert got["use_allocator"] is False and got["stats"] == {} and got["cpu"] == 1.0, got
        assert lines == ["plateau: plateau.torch.use_allocator(): torch sees no CUDA device: PyTorch's own allocator "
                         "stays"], r.stderr
        assert "/libplateau_alloc.so" in got["path"] and os.path.isfile(got["path"]), got
        assert "undefined symbol: plateau_torch_nonexistent" in got["missing"], got
        print(f"ok: torch {version} without a GPU: use_allocator() refuses in one line; torch's own "
              f"CUDAPluggableAllocator loads {got['path']} by plateau_torch_malloc/free and "
              f"change_current_allocator() takes it")


MODES = {"steps": mode_steps, "tensors": mode_tensors, "ranks": mode_ranks, "memory_viz": mode_memory_viz,
         "tune_snapshot": mode_tune_snapshot, "allocator": mode_allocator, "venv_offline": mode_venv_offline}

if __name__ == "__main__":
    MODES[sys.argv[1]](sys.argv[2:])
