"""Target for cli.unnoticed: a torch program whose optimizer steps (the bootstrap installs its end-of-run record:
docs/end-of-run.md), that catches a CUDA out-of-memory error, makes one with two arguments, and then dies of one
uncaught; it also exits through its own atexit callback. Traced and untraced, its output, files and exit status must
be the same."""
import atexit

import torch

atexit.register(lambda: print("atexit: the program's own callback"))
model = torch.nn.Linear(4, 4)  # (B,4) -> (B,4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
try:
    raise torch.cuda.OutOfMemoryError("CUDA out of memory (caught)")
except torch.cuda.OutOfMemoryError as e:
    print("caught:", repr(e), e.args, isinstance(e, RuntimeError))
e = torch.cuda.OutOfMemoryError("two", 2)
print(e.args, str(e), type(e).__mro__)
try:
    raise MemoryError("host (caught)")
except MemoryError as e:
    print("caught:", repr(e))
raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (uncaught)")
