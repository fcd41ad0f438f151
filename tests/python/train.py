"""An unmodified PyTorch CPU training script for the python.* tests: no plateau import, no plateau_step().

--steps N optimizer steps (iterations); --accum K micro-batches per optimizer step (gradient accumulation);
--gan: two optimizers per iteration, a discriminator step then a generator step (GAN-style); --explicit: also call
plateau_step() through ctypes after each iteration, as a program already instrumented by hand would;
--scheduler: an LR scheduler (it wraps optimizer.step on the instance). torch >= 2 only: --scaler-skip I,J,...: a
GradScaler on the CPU, with an inf loss at iterations I, J, ... whose optimizer step the scaler skips; --compile
[BACKEND]: the generator through torch.compile (default backend: inductor). Prints the number of optimizer.step()
calls (with --scaler-skip: the steps that ran, counted by a per-instance post hook).
"""
import argparse
import ctypes

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=12)
p.add_argument("--accum", type=int, default=1)
p.add_argument("--gan", action="store_true")
p.add_argument("--explicit", action="store_true")
p.add_argument("--scheduler", action="store_true")
p.add_argument("--scaler-skip", default=None)
p.add_argument("--compile", nargs="?", const="inductor", default=None)
args = p.parse_args()

explicit = None
if args.explicit:
    try:
        explicit = ctypes.CDLL(None).plateau_step
    except AttributeError:
        pass

torch.manual_seed(0)
torch.set_num_threads(1)
G = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))  # (B,16) -> (B,32)
D = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))   # (B,32) -> (B,1)
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.SGD(D.parameters(), lr=1e-2, momentum=0.9) if args.gan else None
sched = torch.optim.lr_scheduler.StepLR(opt_g, step_size=5) if args.scheduler else None
n_calls = 0
scaler, skip, ran = None, set(), [0]
if args.scaler_skip is not None:
    scaler = torch.amp.GradScaler("cpu")
    skip = {int(i) for i in args.scaler_skip.split(",") if i}
    opt_g.register_step_post_hook(lambda *a: ran.__setitem__(0, ran[0] + 1))
if args.compile:
    G = torch.compile(G, backend=args.compile)
for it in range(args.steps):
    if args.gan:  # discriminator: real vs fake, then generator: fool D
        opt_d.zero_grad(set_to_none=True)
        fake = G(torch.randn(8, 16)).detach()
        loss_d = D(torch.randn(8, 32)).mean() - D(fake).mean()
        loss_d.backward()
        opt_d.step()
        n_calls += 1
        opt_g.zero_grad(set_to_none=True)
        loss_g = -D(G(torch.randn(8, 16))).mean()
        loss_g.backward()
    else:
        opt_g.zero_grad(set_to_none=True)
        for micro in range(args.accum):  # gradients accumulate (+=) over the micro-batches
            x = torch.randn(8, 16)
            loss = G(x).pow(2).mean() / args.accum
            if it in skip:
                loss = loss * float("inf")  # inf gradients: the scaler skips this optimizer step
            (scaler.scale(loss) if scaler else loss).backward()
    if scaler:
        scaler.step(opt_g)
        scaler.update()
        n_calls = ran[0]
    else:
        opt_g.step()
        n_calls += 1
    if sched:
        sched.step()
    if explicit:
        explicit()
print(f"train.py: {args.steps} iterations, {n_calls} optimizer.step() calls")
