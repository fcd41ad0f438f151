"""PyTorch CPU loop: a module keeps a tensor on `self` without detach(), so each step's graph hangs on it."""
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(256, 512)
        self.l2 = torch.nn.Linear(512, 256)
        self.history = []

    def forward(self, x):
        h = torch.nn.functional.gelu(self.l1(x))  # LEAK (allocated here, kept on self below)
        self.history.append(h)
        return self.l2(h)


torch.manual_seed(0)
torch.set_num_threads(1)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
for step in range(200):
    x = torch.randn(64, 256)
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", len(model.history))
