"""python.judge_lightning's log maker: a tiny real Lightning 2 Trainer whose CSVLogger writes the metrics.csv that
`plateau judge` reads. Usage: lightning_csv.py OUT_DIR SHAPE STEPS, SHAPE `plateau` or `leak`. Each training step
logs `gpu_mem_mb` (self.log, every step) from a scripted series, what a user's `torch.cuda.memory_reserved()`
column would hold on a GPU (this runs on the CPU):
  plateau  2000 MB rising by 35 MB a step for 40 steps (the caching allocator's warmup), then 3400 MB with +-1.5 MB
           of jitter to the end
  leak     the same warmup, then +3 MB a step to the end
The jitter is a fixed pattern, so the file is the same on every run. Lightning writes OUT_DIR/csv/version_0/
metrics.csv: columns epoch, gpu_mem_mb, step, train_loss, val_loss (Lightning sorts them), one row per step and,
every 50 steps, a validation row of the same step with only epoch, step and val_loss. CPU, no download."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch113_compat  # noqa: E402  (torch 1.13 on Python 3.11 only; see the module)

torch113_compat.install()
import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402

out, shape, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
WARMUP, BASE, RISE, LEAK = 40, 2000.0, 35.0, 3.0
JITTER = (0.0, 1.5, -0.5, 1.0, -1.5, 0.5)


def memory_mb(step):
    if step < WARMUP:
        return BASE + RISE * step
    top = BASE + RISE * WARMUP
    if shape == "leak":
        return top + LEAK * (step - WARMUP)
    if shape == "plateau":
        return top + JITTER[step % len(JITTER)]
    raise SystemExit(f"lightning_csv.py: shape {shape!r} is neither plateau nor leak")


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 16)

    def training_step(self, batch, i):  # batch: [(B,16)]
        (x,) = batch
        loss = (self.net(x) - x).pow(2).mean()
        self.log("train_loss", loss)
        self.log("gpu_mem_mb", memory_mb(self.global_step))
        return loss

    def validation_step(self, batch, i):  # batch: [(B,16)]
        (x,) = batch
        self.log("val_loss", (self.net(x) - x).pow(2).mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


g = torch.Generator().manual_seed(0)
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4 * steps, 16, generator=g)),
                                   batch_size=4)
trainer = pl.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=CSVLogger(out, name="csv", version=0),
                     log_every_n_steps=1, val_check_interval=50, limit_val_batches=2, num_sanity_val_steps=0,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Model(), data, data)
print(f"lightning_csv.py: global_step {trainer.global_step}")
