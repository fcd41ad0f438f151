"""Test bodies that leak or plateau, shared by the plateau plugin's tests and the pytest-memray comparison
(tests/python/test_pytest.py, bench/pytest_plugins.sh). Each is one "step" of work, called repeatedly.

- leak_py:      keeps 16 KiB per call in a module-level list (a leak: +16 KiB/step, forever)
- plateau_py:   a cache of 64 entries of 64 KiB, filled over the first 64 calls, then replaced in place (4 MiB of
                warmup, then flat: no leak)
- leak_torch:   keeps every step's output (8 KiB) and its autograd node in a list (`history.append(out)`)
- plateau_torch: Adam over a small MLP (its state is made at the first step) and a bounded deque of the last 32
                detached outputs (warmup, then flat)
"""
import collections

_kept = []
_cache = {}
_calls = collections.Counter()


def leak_py():
    _kept.append(bytearray(16 * 1024))


def plateau_py():
    i = _calls["plateau_py"]
    _calls["plateau_py"] += 1
    _cache[i % 64] = bytearray(64 * 1024)


class Torch:
    """A small model and its optimizer, made once per test (as a fixture would)."""

    def __init__(self):
        import torch
        torch.manual_seed(0)
        self.torch = torch
        self.model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.x = torch.randn(32, 256)
        self.history = []
        self.recent = collections.deque(maxlen=32)

    def train_step(self):
        self.opt.zero_grad()
        out = self.model(self.x)
        loss = out.square().mean()
        loss.backward()
        self.opt.step()
        return out, loss


def leak_torch(t):
    out, loss = t.train_step()
    t.history.append(out)  # keeps each step's output (8 KiB) and its autograd node: history.append(out)


def plateau_torch(t):
    out, loss = t.train_step()
    t.recent.append(out.detach())
