"""A tiny single-process accelerate loop for python.accelerate_real: Accelerator().prepare(model, optimizer,
dataloader), accelerator.backward(), --accum micro-batches per optimizer step (accelerator.accumulate); no plateau
line. CPU. Prints how many optimizer steps accelerate applied (batches where it synced gradients)."""
import argparse

import torch
from accelerate import Accelerator

p = argparse.ArgumentParser()
p.add_argument("--batches", type=int, default=12)
p.add_argument("--accum", type=int, default=1)
args = p.parse_args()

accelerator = Accelerator(cpu=True, gradient_accumulation_steps=args.accum)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
g = torch.Generator().manual_seed(0)
dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(args.batches * 4, 16, generator=g)),
                                 batch_size=4)
model, opt, dl = accelerator.prepare(model, opt, dl)
applied = 0
for (x,) in dl:  # x: (4,16)
    with accelerator.accumulate(model):
        loss = (model(x) - x).pow(2).mean()
        accelerator.backward(loss)
        opt.step()
        if accelerator.sync_gradients and not opt.step_was_skipped:
            applied += 1
        opt.zero_grad()
print(f"accelerate_train.py: optimizer steps {applied}")
