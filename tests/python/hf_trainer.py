"""A tiny transformers Trainer run for python.callbacks_real (transformers 4.30 over torch 1.13) and
torch2.callbacks_real (transformers 5 over torch 2): --steps N optimizer steps of --accum micro-batches, an
evaluation every 3 steps; --callback adds plateau.TrainerCallback() (the only plateau line). CPU, no download."""
import argparse
import dataclasses
import tempfile

import torch
from transformers import Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
p.add_argument("--accum", type=int, default=2)
p.add_argument("--callback", action="store_true")
args = p.parse_args()


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(16, generator=g)}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))

    def forward(self, x):  # x: (B,16)
        return {"loss": (self.net(x) - x).pow(2).mean()}


callbacks = []
if args.callback:
    import plateau
    callbacks.append(plateau.TrainerCallback())
# the same arguments under the names of either version: 4.46 renamed evaluation_strategy to eval_strategy and 5.0
# dropped the old name; 4.38 added use_cpu in place of no_cuda, which 5.0 dropped
fields = {f.name for f in dataclasses.fields(TrainingArguments)}
named = {"eval_strategy" if "eval_strategy" in fields else "evaluation_strategy": "steps",
         "use_cpu" if "use_cpu" in fields else "no_cuda": True}
with tempfile.TemporaryDirectory() as out:
    targs = TrainingArguments(output_dir=out, max_steps=args.steps, gradient_accumulation_steps=args.accum,
                              per_device_train_batch_size=4, per_device_eval_batch_size=8, report_to=[],
                              save_strategy="no", logging_strategy="no", disable_tqdm=True, eval_steps=3,
                              dataloader_num_workers=0, **named)
    trainer = Trainer(model=Model(), args=targs, train_dataset=Data(), eval_dataset=Data(), callbacks=callbacks)
    trainer.train()
    print(f"hf_trainer.py: global_step {trainer.state.global_step}")
