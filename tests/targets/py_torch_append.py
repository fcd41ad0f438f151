"""PyTorch CPU loop: every step's outputs are appended to a list (the logits stay alive)."""
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
epoch_logits = []


def train_epoch(steps):
    for step in range(steps):
        x = torch.randn(64, 256)
        logits = model(x)
        loss = (logits - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        epoch_logits.append(logits.detach().clone())  # LEAK


train_epoch(200)
print("done", len(epoch_logits))
