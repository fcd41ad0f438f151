"""The census's cost on a program whose globals hold a large heap (bench/census_overhead.sh): a table of 500,000
records (a dict and a list each: 1.5 million objects), then a small PyTorch CPU training loop over it. Unmarked."""
import argparse
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=400)
p.add_argument("--records", type=int, default=500000)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)
records = [{"id": i, "tokens": [i % 251, (i * 7) % 251]} for i in range(args.records)]
index = {r["id"]: r for r in records[:100000]}
model = torch.nn.Sequential(torch.nn.Embedding(251, 64), torch.nn.Linear(64, 251))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
t0 = time.time()
for step in range(args.steps):
    batch = torch.tensor([records[(step * 64 + j) % len(records)]["tokens"] for j in range(64)])
    logits = model(batch[:, 0])
    loss = torch.nn.functional.cross_entropy(logits, batch[:, 1])
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"done {args.steps} steps in {time.time() - t0:.1f} s, {len(records)} records, {len(index)} indexed")
