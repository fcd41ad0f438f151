#!/usr/bin/env python3
"""Generate the labeled series corpus in tests/fixtures/series/ (deterministic: fixed seed, no external input).

Each file is the seriesfile format (reports/series/seriesfile.h): a header line
    # plateau-series 1 label=LABEL name=NAME key=value ...
then `STEP VALUE` lines (several lines per step = several samples within the step; the report keeps their minimum).

Header keys the acceptance test (tests/reports/test_corpus.c) reads:
  label      ground truth: plateau | flat | leak | warmup (a warmup cut off before it ended)
  expect     the exact verdict required (optional)
  tail_from  step where the series' last regime starts (warmup end, or leak onset; for a leak growing since step 0
             with no other regime it is the warmup allowance, 100 steps, see docs/verdict.md)
  rate_rel   leak slope per step / level at tail_from (leaks only)
  short      1 = run too short to decide by design (excluded from the recall target, must not be a false leak)
  warmup_min, warmup_max   bounds on the reported warmup end step (seed003_run2)

Usage: tools/gen-series-corpus.py [OUT_DIR]   (default: tests/fixtures/series next to this script's repo)
Re-running rewrites every file; review changes with `git diff --stat tests/fixtures/series`.
"""
import math
import os
import random
import sys

SEED = int(os.environ.get("PL_CORPUS_SEED", "20261121"))  # override only for robustness sweeps
GiB = 1 << 30
MiB = 1 << 20


class Noise:
    """Multiplicative noise: iid Gaussian, or AR(1) with coefficient phi (same marginal sd)."""

    def __init__(self, rng, sd, phi=0.0):
        self.rng, self.sd, self.phi, self.state = rng, sd, phi, 0.0

    def __call__(self):
        if self.sd == 0:
            return 0.0
        innov = self.rng.gauss(0, self.sd * math.sqrt(1 - self.phi * self.phi))
        self.state = self.phi * self.state + innov
        return self.state


def write(out, idx, name, meta, rows):
    path = os.path.join(out, f"{idx:03d}_{name}.txt")
    hdr = " ".join(f"{k}={v}" for k, v in meta.items())
    with open(path, "w") as f:
        f.write(f"# plateau-series 1 name={name} {hdr}\n")
        for step, val in rows:
            f.write(f"{step} {val:.0f}\n")


def series(rng, n, fn, sd=0.0, phi=0.0, per_step=1, spike=0.0, integer=False):
    """Sample fn(t) for t = 1..n with noise; per_step > 1 adds samples that sit above the step's baseline by up to
    `spike` (relative): activations and transient buffers inside a step."""
    noise = Noise(rng, sd, phi)
    rows = []
    for t in range(1, n + 1):
        base = fn(t)
        v = base * (1 + noise())
        if integer:
            v = round(v)
        rows.append((t, max(v, 0)))
        for _ in range(per_step - 1):
            rows.append((t, max(v * (1 + rng.uniform(0, spike)), 0)))
    return rows


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures", "series")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".txt"):
            os.remove(os.path.join(out, f))
    rng = random.Random(SEED)
    items = []

    def add(name, meta, rows):
        items.append((name, meta, rows))

    # ---- a real warmup (series seed003_*): the numbers from a production log, in MB ------------------------------
    run1 = [5552, 7159, 8851, 10515, 12227, 13919, 15736]
    add("seed003_run1_cut_at_70", {"label": "warmup", "expect": "inconclusive", "unit": "bytes"},
        [(10 * (i + 1), v * 1_000_000) for i, v in enumerate(run1)])
    # the same run as if sampled every step (linear interpolation + 0.2 % noise): enough points that only the warmup
    # allowance, not a lack of data, keeps it from being called a leak
    fine = []
    for t in range(10, 71):
        i = min((t - 10) // 10, 5)
        v = run1[i] + (run1[i + 1] - run1[i]) * (t - 10 - 10 * i) / 10
        fine.append((t, v * 1_000_000 * (1 + rng.gauss(0, 0.002))))
    add("seed003_run1_every_step", {"label": "warmup", "expect": "inconclusive", "unit": "bytes"}, fine)
    run2 = [5434, 7017, 8721, 10375, 12000, 13757, 15559, 17412, 17658, 17693, 17694, 17694, 17437, 17437, 17437,
            17378, 17378, 17229, 17229, 17051, 17052, 17041, 17033, 17032]
    add("seed003_run2", {"label": "plateau", "expect": "plateau", "tail_from": 90, "warmup_min": 80,
                         "warmup_max": 90, "unit": "bytes"},
        [(10 * (i + 1), v * 1_000_000) for i, v in enumerate(run2)])
    add("seed003_run2_tensors", {"label": "plateau", "tail_from": 90, "unit": "count"},
        [(10 * (i + 1), 6529 if i < 8 else 7070) for i in range(24)])

    # ---- plateaus: linear-then-flat ------------------------------------------------------------------------------
    for w, n, sd in [(20, 200, 0.002), (50, 300, 0.005), (90, 240, 0.01), (150, 400, 0.005), (200, 600, 0.02),
                     (30, 400, 0.0), (60, 300, 0.01)]:
        lo, hi = 5 * GiB, 17 * GiB
        add(f"plateau_linear_w{w}_n{n}_sd{sd}", {"label": "plateau", "tail_from": w, "unit": "bytes"},
            series(rng, n, lambda t, w=w: lo + (hi - lo) * min(t / w, 1.0), sd))
    # exponential approach (1 - exp(-t/tau)): never quite flat; tail_from where 99 % is reached
    for tau, n, sd in [(10, 200, 0.005), (30, 400, 0.005), (60, 600, 0.01), (20, 300, 0.0), (40, 500, 0.002)]:
        lo, hi = 2 * GiB, 6 * GiB
        add(f"plateau_exp_tau{tau}_n{n}_sd{sd}", {"label": "plateau", "tail_from": int(4.6 * tau), "unit": "bytes"},
            series(rng, n, lambda t, tau=tau: lo + (hi - lo) * (1 - math.exp(-t / tau)), sd))
    # slow exponential approach in a short run: still growing at the end, but decelerating: never a leak
    for tau, n, sd in [(60, 200, 0.005), (100, 300, 0.002)]:
        lo, hi = 2 * GiB, 6 * GiB
        add(f"plateau_exp_slow_tau{tau}_n{n}", {"label": "plateau", "tail_from": int(4.6 * tau), "unit": "bytes"},
            series(rng, n, lambda t, tau=tau: lo + (hi - lo) * (1 - math.exp(-t / tau)), sd))
    # step-wise growth (cache grows in chunks for a while, then stops)
    for jumps, n, sd in [((5, 20, 45, 80), 300, 0.005), ((10, 60, 120), 400, 0.01), ((3,), 150, 0.002)]:
        add(f"plateau_steps_{len(jumps)}_n{n}", {"label": "plateau", "tail_from": jumps[-1], "unit": "bytes"},
            series(rng, n, lambda t, j=jumps: 3 * GiB + sum(512 * MiB for s in j if t >= s), sd))
    # sawtooth over several steps (gc-like: grows, collected, grows) on top of a warmed-up plateau
    for period, amp, n in [(10, 0.05, 300), (25, 0.10, 400), (7, 0.03, 200)]:
        add(f"plateau_sawtooth_p{period}_a{amp}", {"label": "plateau", "tail_from": 40, "unit": "bytes"},
            series(rng, n, lambda t, p=period, a=amp: (4 * GiB + 4 * GiB * min(t / 40, 1)) * (1 + a * (t % p) / p),
                   0.003))
    # periodic spikes: within-step (several samples per step) and whole evaluation steps every 50
    add("plateau_spikes_within_step", {"label": "plateau", "tail_from": 30, "unit": "bytes"},
        series(rng, 300, lambda t: 6 * GiB + 2 * GiB * min(t / 30, 1), 0.003, per_step=4, spike=0.4))
    add("plateau_spikes_eval_steps", {"label": "plateau", "tail_from": 30, "unit": "bytes"},
        series(rng, 400, lambda t: (6 * GiB + 2 * GiB * min(t / 30, 1)) * (1.25 if t % 50 == 0 else 1.0), 0.003))
    # autocorrelated noise around a plateau
    for phi, sd in [(0.8, 0.01), (0.95, 0.01), (0.9, 0.02)]:
        add(f"plateau_ar{phi}_sd{sd}", {"label": "plateau", "tail_from": 50, "unit": "bytes"},
            series(rng, 400, lambda t: 3 * GiB + 3 * GiB * min(t / 50, 1), sd, phi))
    # plateau drifting slowly down after warmup (seed 003's tail does this)
    add("plateau_then_decline", {"label": "plateau", "tail_from": 60, "unit": "bytes"},
        series(rng, 300, lambda t: 10 * GiB * min(t / 60, 1) + 2 * GiB - (0.0003 * 10 * GiB * max(t - 60, 0)),
               0.003))
    # short runs: never a leak; a plateau this short may be a plateau or inconclusive
    add("plateau_short_n50", {"label": "plateau", "tail_from": 20, "short": 1, "unit": "bytes"},
        series(rng, 50, lambda t: 1 * GiB + 1 * GiB * min(t / 20, 1), 0.005))
    add("plateau_short_n30", {"label": "plateau", "tail_from": 10, "short": 1, "unit": "bytes"},
        series(rng, 30, lambda t: 1 * GiB + 1 * GiB * min(t / 10, 1), 0.005))
    # live tensor count stepping up once (optimizer state) then exact
    add("plateau_tensor_count", {"label": "plateau", "tail_from": 2, "unit": "count"},
        series(rng, 200, lambda t: 812 if t < 2 else 1236, integer=True))

    # ---- flat --------------------------------------------------------------------------------------------------
    for sd, n, phi in [(0.0, 100, 0.0), (0.002, 200, 0.0), (0.01, 300, 0.0), (0.03, 400, 0.0), (0.01, 300, 0.9)]:
        add(f"flat_sd{sd}_n{n}_ar{phi}", {"label": "flat", "unit": "bytes"},
            series(rng, n, lambda t: 8 * GiB, sd, phi))
    add("flat_spikes_eval_steps", {"label": "flat", "unit": "bytes"},
        series(rng, 300, lambda t: 8 * GiB * (1.3 if t % 25 == 0 else 1.0), 0.003))
    add("flat_sawtooth", {"label": "flat", "unit": "bytes"},
        series(rng, 300, lambda t: 8 * GiB * (1 + 0.08 * (t % 15) / 15), 0.002))
    add("flat_count", {"label": "flat", "unit": "count"}, series(rng, 200, lambda t: 4200, integer=True))
    add("flat_drop_after_init", {"label": "flat", "unit": "bytes"},
        series(rng, 200, lambda t: 6 * GiB if t < 5 else 4 * GiB, 0.003))

    # ---- leaks ---------------------------------------------------------------------------------------------------
    # linear from the first step (no warmup): judged after the warmup allowance (tail_from=100)
    for r, n, sd in [(0.01, 300, 0.005), (0.002, 400, 0.01), (0.001, 300, 0.002)]:
        add(f"leak_linear_from0_r{r}", {"label": "leak", "tail_from": 100, "rate_rel": r, "unit": "bytes"},
            series(rng, n, lambda t, r=r: 4 * GiB * (1 + r * t), sd))
    # warmup, then a leak at a slower rate
    for w, r, n, sd in [(20, 0.005, 200, 0.005), (50, 0.001, 300, 0.005), (30, 0.002, 300, 0.01),
                        (80, 0.001, 400, 0.002), (40, 0.0005, 500, 0.005), (60, 0.0002, 1000, 0.003),
                        (20, 0.001, 250, 0.0), (90, 0.003, 300, 0.02)]:
        hi = 12 * GiB
        add(f"leak_after_warmup_w{w}_r{r}_sd{sd}", {"label": "leak", "tail_from": w, "rate_rel": r, "unit": "bytes"},
            series(rng, n, lambda t, w=w, r=r: 2 * GiB + (hi - 2 * GiB) * min(t / w, 1) + r * hi * max(t - w, 0),
                   sd))
    # a leak that starts mid-run after a plateau
    for onset, r, n, sd in [(150, 0.002, 350, 0.005), (200, 0.001, 400, 0.003), (100, 0.005, 250, 0.01),
                            (300, 0.001, 500, 0.005)]:
        add(f"leak_midrun_at{onset}_r{r}", {"label": "leak", "tail_from": onset, "rate_rel": r, "unit": "bytes"},
            series(rng, n, lambda t, o=onset, r=r: 6 * GiB * min(t / 30, 1) + 2 * GiB
                   + r * 8 * GiB * max(t - o, 0), sd))
    # sub-linear but unbounded: sqrt and t^0.7 on top of a warmup
    for p_, a, n, sd in [(0.5, 0.04, 400, 0.003), (0.7, 0.01, 400, 0.005), (0.5, 0.08, 600, 0.01)]:
        # rate_rel: the (decaying) rate at the end of the run, relative to the level there
        end_rate = a * 8 * GiB * p_ * (n - 30) ** (p_ - 1) / (8 * GiB + a * 8 * GiB * (n - 30) ** p_)
        add(f"leak_sublinear_pow{p_}_a{a}", {"label": "leak", "tail_from": 30, "unit": "bytes",
                                              "rate_rel": round(end_rate, 6)},
            series(rng, n, lambda t, p_=p_, a=a: 5 * GiB * min(t / 30, 1) + 3 * GiB
                   + a * 8 * GiB * max(t - 30, 0) ** p_, sd))
    # step-wise leak: a chunk every P steps, forever
    for period, n in [(20, 300), (50, 500)]:
        add(f"leak_stepwise_p{period}", {"label": "leak", "tail_from": 30, "unit": "bytes",
                                         "rate_rel": round(256 * MiB / period / (6 * GiB), 6)},
            series(rng, n, lambda t, p=period: 6 * GiB * min(t / 30, 1) + 256 * MiB * (max(t - 30, 0) // p),
                   0.002))
    # leaks under sawtooth, periodic spikes and autocorrelated noise
    add("leak_under_sawtooth", {"label": "leak", "tail_from": 40, "rate_rel": 0.001, "unit": "bytes"},
        series(rng, 400, lambda t: (8 * GiB * min(t / 40, 1) + 0.001 * 8 * GiB * max(t - 40, 0))
               * (1 + 0.05 * (t % 12) / 12), 0.003))
    add("leak_under_spikes", {"label": "leak", "tail_from": 30, "rate_rel": 0.001, "unit": "bytes"},
        series(rng, 300, lambda t: (6 * GiB * min(t / 30, 1) + 0.001 * 6 * GiB * max(t - 30, 0))
               * (1.3 if t % 50 == 0 else 1.0), 0.003, per_step=3, spike=0.3))
    for phi, r in [(0.8, 0.002), (0.9, 0.003)]:
        add(f"leak_ar{phi}_r{r}", {"label": "leak", "tail_from": 40, "rate_rel": r, "unit": "bytes"},
            series(rng, 400, lambda t, r=r: 6 * GiB * min(t / 40, 1) + 0.001 + r * 6 * GiB * max(t - 40, 0),
                   0.01, phi))
    # noisy leaks
    for sd in (0.02, 0.05):
        add(f"leak_noisy_sd{sd}", {"label": "leak", "tail_from": 30, "rate_rel": 0.002, "unit": "bytes"},
            series(rng, 500, lambda t: 6 * GiB * min(t / 30, 1) + 0.002 * 6 * GiB * max(t - 30, 0), sd))
    # live tensor count growing by one per step (retained outputs)
    add("leak_tensor_count", {"label": "leak", "tail_from": 10, "rate_rel": round(1 / 1236, 6), "unit": "count"},
        series(rng, 300, lambda t: 1236 + max(t - 10, 0) if t >= 2 else 812, integer=True))
    # short runs of a leak: cannot be decided, must not be a false anything-else either
    add("leak_short_n40", {"label": "leak", "short": 1, "tail_from": 100, "rate_rel": 0.01, "unit": "bytes"},
        series(rng, 40, lambda t: 4 * GiB * (1 + 0.01 * t), 0.005))
    add("leak_short_after_warmup", {"label": "leak", "short": 1, "tail_from": 20, "rate_rel": 0.002,
                                    "unit": "bytes"},
        series(rng, 45, lambda t: 4 * GiB * min(t / 20, 1) + 1 * GiB + 0.002 * 4 * GiB * max(t - 20, 0), 0.005))

    # periodic cleanup with a large sawtooth (gc.collect() / empty_cache() every N steps freeing a third to a half of
    # the level): judged on each period's low (docs/verdict.md section 1); added last so the series above keep their
    # random draws
    for period, amp, n in [(10, 0.5, 200), (10, 0.3, 300), (20, 0.4, 400), (5, 0.6, 150)]:
        add(f"plateau_cleanup_p{period}_a{amp}_n{n}", {"label": "plateau", "unit": "bytes"},
            series(rng, n, lambda t, p=period, a=amp: (2 * GiB + 2 * GiB * min(t / 30, 1)) * (1 + a * (t % p) / p),
                   0.003))
    for period, amp, r in [(10, 0.3, 0.001), (10, 0.5, 0.002), (20, 0.4, 0.001)]:
        add(f"leak_under_cleanup_p{period}_a{amp}_r{r}",
            {"label": "leak", "tail_from": 30, "rate_rel": r, "unit": "bytes"},
            series(rng, 300, lambda t, p=period, a=amp, r=r: (2 * GiB + 2 * GiB * min(t / 30, 1)
                                                             + r * 4 * GiB * max(t - 30, 0)) * (1 + a * (t % p) / p),
                   0.003))

    for i, (name, meta, rows) in enumerate(items):
        write(out, i, name, meta, rows)
    print(f"wrote {len(items)} series to {out}")


if __name__ == "__main__":
    main()
