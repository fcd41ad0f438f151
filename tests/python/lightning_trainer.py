"""A tiny Lightning Trainer run for python.lightning_real: --steps N optimizer steps (max_steps) of --accum
micro-batches (accumulate_grad_batches), validation every --val-every batches; --callback adds
plateau.LightningCallback() (the only plateau line). --package picks the Lightning to import: pytorch_lightning
(1.x) or lightning.pytorch (2.x); the program imports only that one. CPU, no logger, no checkpoint, no download.
Prints the Trainer's global_step and how many validation runs it made."""
import argparse
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch113_compat  # noqa: E402  (torch 1.13 on Python 3.11 only; see the module)

p = argparse.ArgumentParser()
p.add_argument("--package", default="pytorch_lightning")
p.add_argument("--steps", type=int, default=6)
p.add_argument("--accum", type=int, default=1)
p.add_argument("--val-every", type=int, default=4)
p.add_argument("--callback", action="store_true")
args = p.parse_args()

torch113_compat.install()
pl = importlib.import_module(args.package)
import torch  # noqa: E402


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
        self.n_validations = 0

    if pl.__version__.startswith("1."):
        def _register_sharded_tensor_state_dict_hooks_if_available(self):
            # Lightning 1.9 reads Debian's torch "1.13.0a0" as older than 1.13 and takes its torch < 1.13 branch
            # here, which torch 1.13 rejects (a weak reference to a weakref proxy). No sharded tensors: skip it.
            pass

    def training_step(self, batch, i):  # batch: [(B,16)]
        (x,) = batch
        return (self.net(x) - x).pow(2).mean()

    def validation_step(self, batch, i):
        (x,) = batch
        return (self.net(x) - x).pow(2).mean()

    def on_validation_start(self):
        self.n_validations += 1

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


g = torch.Generator().manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(256, 16, generator=g))
train = torch.utils.data.DataLoader(data, batch_size=4)
val = torch.utils.data.DataLoader(data, batch_size=8)
callbacks = []
if args.callback:
    import plateau
    callbacks.append(plateau.LightningCallback())
    # both Lightnings are installed: the callback must subclass the one this program imported
    assert isinstance(callbacks[0], pl.Callback), type(callbacks[0]).__mro__
trainer = pl.Trainer(max_steps=args.steps, accumulate_grad_batches=args.accum, val_check_interval=args.val_every,
                     limit_val_batches=2, num_sanity_val_steps=0, accelerator="cpu", devices=1, logger=False,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     callbacks=callbacks)
model = Model()
trainer.fit(model, train, val)
print(f"lightning_trainer.py: global_step {trainer.global_step} validations {model.n_validations}")
