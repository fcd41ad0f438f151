"""PyTorch CPU loop: `total_loss += loss` keeps every step's autograd graph alive, and with it the tensors the graph
saved for backward: the input batch (addmm saves it for the weight gradient) and the activations. Both lines that
allocate them are marked: which one grows most in a run depends on where the report's tail starts."""
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
total_loss = 0
for step in range(200):
    x = torch.randn(64, 256)  # LEAK (saved by the graph)
    loss = (model(x) - x).pow(2).mean()  # LEAK (the graph's activations, kept by total_loss below)
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
    total_loss += loss
print("done", float(total_loss))
