"""python.lightning_loggers: a real Lightning 2 Trainer (the framework venv) with a CSVLogger and
plateau.LightningCallback(), whose training step keeps 256 KiB per step (a leak). Usage: lightning_loggers.py
OUT_DIR STEPS. CPU, no download. The test reads OUT_DIR's metrics.csv back.
A hand-off, not a timing: 20 steps before the end, the step waits until plateau run's watcher has published LEAK for
this process (RUN_DIR/live.prom; at most 120 s, a hang guard: exit 4), so the last rows' verdict does not depend on
how fast the watcher keeps up on a loaded machine."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch113_compat  # noqa: E402  (torch 1.13 on Python 3.11 only; see the module)

torch113_compat.install()
import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402

import plateau  # noqa: E402

out, steps = sys.argv[1], int(sys.argv[2])


def wait_for_leak():
    """Until the live verdict of this process, as the callbacks read it, is LEAK (code 6)."""
    import time
    from plateau import _loggers
    live, t0 = _loggers.Live(), time.monotonic()
    while live.values().get("plateau/verdict") != 6:
        if time.monotonic() - t0 > 120:
            print("lightning_loggers.py: no LEAK in the live verdict after 120 s", file=sys.stderr)
            sys.exit(4)
        time.sleep(0.05)


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 16)
        self.kept = []

    def training_step(self, batch, i):  # batch: [(B,16)]
        (x,) = batch
        self.kept.append(torch.ones(64 * 1024))  # 256 KiB kept per step
        if i == steps - 20:
            wait_for_leak()
        return (self.net(x) - x).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


g = torch.Generator().manual_seed(0)
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4096, 16, generator=g)), batch_size=4)
trainer = pl.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=CSVLogger(out, name="csv", version=0),
                     log_every_n_steps=5, enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False, callbacks=[plateau.LightningCallback()])
trainer.fit(Model(), data)
print(f"lightning_loggers.py: global_step {trainer.global_step}")
