#!/usr/bin/env python3
"""python.retention: who keeps it (docs/retention.md), on the corpus of tests/python/retention/.

Each script there is a small, unmodified PyTorch CPU training loop with one classic retention (leak_*.py) or a
healthy loop with large but bounded containers (control_*.py); its second line says what the report must name:
`# expect: PATH` (a holder's path) or `# expect: none`; for a leak, the line named as growing it must be in the script
and contain the holder's last name (or the text of a `# line-has: TEXT` header line); with `# allocated-at: TEXT`, the
report must tie the holder to the allocation site at the line containing TEXT (its storages begin at sampled
allocations made there). Every script runs under
`plateau run` with /usr/bin/python3 (Debian's torch 1.13; PL_TORCH_PYTHON another, e.g. torch 2's venv); its output
must be the output it has without plateau, and `plateau report --json` must name PATH among the process's retention
holders (named: true) for a leak, and name no holder for a control.
PLATEAU_CENSUS_BUDGET=0.5 makes censuses frequent enough in runs of a few seconds (the default 1 % is measured in
bench/RESULTS.md).
PL_RETENTION_DEVICE=cuda (the GPU check, tools/gpu/retention.sh): every script runs, untraced and traced, with torch's
default device set to it (torch.set_default_device, torch 2, from a `sitecustomize` on PYTHONPATH, which plateau's
own bootstrap passes through to), so the same unmodified loops keep their tensors on the GPU.
Usage: test_retention.py [--repeat N] [SCRIPT ...]   (exit 77 = skipped where torch does not import)
       test_retention.py --rules   the census's rules in-process (tests/python/census_rules.py): a local deleted after
                                   a census is freed, nothing kept between censuses, nothing printed or imported, gc
                                   untouched, growth reported with its history, the object cap says it stopped short
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

PLATEAU = os.environ["PL_PLATEAU"]
SRC = os.environ["PL_SRC"]
TORCH_PY = os.environ.get("PL_TORCH_PYTHON", "/usr/bin/python3")
CORPUS = os.path.join(SRC, "tests", "python", "retention")
SKIP = 77


DEVICE = os.environ.get("PL_RETENTION_DEVICE")
DEVICE_BOOT = None  # a folder holding the sitecustomize.py that sets DEVICE, made in main()


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLATEAU_") and k != "PYTHONPATH"}
    if DEVICE_BOOT:
        env["PYTHONPATH"] = DEVICE_BOOT
    env.update(extra)
    return env


def device_boot(tmp):
    d = os.path.join(tmp, "device-boot")
    os.makedirs(d)
    with open(os.path.join(d, "sitecustomize.py"), "w") as f:
        f.write("import torch\ntorch.set_default_device(%r)\n" % DEVICE)
    return d


def expected(script):
    with open(script) as f:
        for line in f.readlines()[:6]:
            if line.startswith("# expect:"):
                v = line.split(":", 1)[1].strip()
                return None if v == "none" else v
    raise AssertionError(f"{script}: no '# expect:' line")


def line_has(script, want):
    """The text the named line must contain: `# line-has: TEXT` in the header, else the holder's last name."""
    with open(script) as f:
        lines = f.read().splitlines()
    for line in lines[:6]:
        if line.startswith("# line-has:"):
            return line.split(":", 1)[1].strip(), lines
    return want.rsplit(".", 1)[-1].split("[", 1)[0], lines


def allocated_at(lines):
    """`# allocated-at: TEXT` in the header: the holder must be tied to the line containing TEXT, else None."""
    for line in lines[:6]:
        if line.startswith("# allocated-at:"):
            return line.split(":", 1)[1].strip()
    return None


def run_one(tmp, script, k):
    name = os.path.basename(script)[:-3]
    d = os.path.join(tmp, f"{name}.{k}")
    env = clean_env(PLATEAU_CENSUS_BUDGET="0.5")
    r = subprocess.run([PLATEAU, "run", "--no-report", "-o", d, "--", TORCH_PY, script], capture_output=True,
                       text=True, timeout=240, env=env)
    assert r.returncode == 0, f"{name}: plateau run exited {r.returncode}\n{r.stderr[-2000:]}"
    j = d + ".json"
    rr = subprocess.run([PLATEAU, "report", d, "--json", j], capture_output=True, text=True, timeout=120)
    assert rr.returncode == 0, f"{name}: plateau report exited {rr.returncode}\n{rr.stderr}"
    with open(j) as f:
        rep = json.load(f)
    procs = [p for p in rep["run"]["processes"] if os.path.basename(script) in p["argv"]]
    assert len(procs) == 1, f"{name}: {[p['argv'] for p in rep['run']['processes']]}"
    return r.stdout, procs[0].get("retention"), rr.stdout


def rules():
    r = subprocess.run([TORCH_PY, os.path.join(SRC, "tests", "python", "census_rules.py"), os.environ["PL_PYTHON_DIR"]],
                       capture_output=True, text=True, timeout=240, env=clean_env(), cwd=tempfile.gettempdir())
    print(r.stdout + r.stderr)
    return 0 if r.returncode == 0 else 1


def main(argv):
    if argv[:1] == ["--rules"]:
        if subprocess.run([TORCH_PY, "-c", "import torch"], capture_output=True).returncode != 0:
            print(f"skip: {TORCH_PY} cannot import torch")
            return SKIP
        return rules()
    repeat = 1
    if argv[:1] == ["--repeat"]:
        repeat, argv = int(argv[1]), argv[2:]
    r = subprocess.run([TORCH_PY, "-c", "import torch"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"skip: {TORCH_PY} cannot import torch")
        return SKIP
    scripts = [os.path.join(CORPUS, s if s.endswith(".py") else s + ".py") for s in argv] or \
        sorted(glob.glob(os.path.join(CORPUS, "*.py")))
    failed = []
    named = {"leak": 0, "control": 0}
    total = {"leak": 0, "control": 0}
    with tempfile.TemporaryDirectory(prefix="pl-retention-") as tmp:
        global DEVICE_BOOT
        if DEVICE:
            DEVICE_BOOT = device_boot(tmp)
            print(f"default device: {DEVICE}")
        for script in scripts:
            name = os.path.basename(script)[:-3]
            want = expected(script)
            plain = subprocess.run([TORCH_PY, script], capture_output=True, text=True, timeout=240,
                                   env=clean_env()).stdout
            for k in range(repeat):
                kind = "leak" if want else "control"
                total[kind] += 1
                try:
                    out, ret, text = run_one(tmp, script, k)
                    assert out == plain, f"{name}: the program's output changed under plateau: {out!r} != {plain!r}"
                    assert ret is not None, f"{name}: no census in the trace"
                    holders = [h["path"] for h in ret["holders"] if h["named"]]
                    if want:
                        assert want in holders, f"{name}: {want} not named: {json.dumps(ret)[:1500]}"
                        h = [h for h in ret["holders"] if h["path"] == want][0]
                        assert h["line"], f"{name}: {want} named without the line that grows it"
                        line = "%s:%d" % (os.path.basename(h["line"]["file"]), h["line"]["line"])
                        has, text = line_has(script, want)
                        assert os.path.samefile(h["line"]["file"], script) and \
                            has in text[h["line"]["line"] - 1], f"{name}: line {line} does not grow {want} ({has!r})"
                        at = allocated_at(text)
                        a = h.get("allocated_at")
                        if at and not a and DEVICE not in (None, "cpu"):
                            # device storages live inside the caching allocator's segments: no sampled host
                            # allocation holds their address, so the tie is absent, and must be (never a wrong one)
                            line += ", allocated-at: none for %s storages (host allocations only)" % DEVICE
                            at = None
                        if at:  # the holder's storages tie it to the site that allocated them (trace 1.9)
                            site = a and a["site"].split(" in ")[0]
                            assert site and site.startswith(name + ".py:") and \
                                at in text[int(site.rsplit(":", 1)[1]) - 1], \
                                f"{name}: allocated_at {a} is not the line of {at!r}"
                            line += ", holds what %s allocated (%d of %d storages)" % (site, a["storages_matched"],
                                                                                      a["storages_checked"])
                        named["leak"] += 1
                        print(f"ok: {name}: {want} named ({h['what']}, {h['size_per_step']:.3g} "
                              f"{h['size_unit']}/step, {line}, fix: {h['likely_fix']})")
                    else:
                        if holders:
                            named["control"] += 1
                        assert not holders, f"{name}: a control named {holders}: {json.dumps(ret)[:1500]}"
                        print(f"ok: {name}: no holder named ({len(ret['holders'])} reported, "
                              f"{ret['censuses']} censuses)")
                except AssertionError as e:
                    failed.append(str(e))
                    print(f"FAIL: {e}")
    print(f"leaks named: {named['leak']}/{total['leak']}; controls with a holder named: "
          f"{named['control']}/{total['control']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
