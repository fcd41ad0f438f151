"""Target: a PyTorch loop that keeps 8 MiB more every optimizer step until the host memory it may use runs out (run
it under an address-space limit, `prlimit --as`): an uncaught MemoryError ends it, exit status 1
(docs/end-of-run.md). `py_oom.py --vm` prints the process's VmSize in KiB once torch is imported, and exits."""
import sys

import torch

if sys.argv[1:] == ["--vm"]:
    print([l.split()[1] for l in open("/proc/self/status") if l.startswith("VmSize:")][0])
    sys.exit(0)

torch.manual_seed(0)
model = torch.nn.Linear(8, 8)  # (B,8) -> (B,8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
kept = []


def keep_more():
    kept.append(bytearray(8 << 20))  # the leak: MemoryError once the limit is reached


for step in range(100000):
    opt.zero_grad()
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
    keep_more()
