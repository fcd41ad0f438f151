# Leak: the loss tensor (with its autograd graph) accumulated across steps: `total_loss += loss`.
# expect: total_loss
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def train(steps):
    total_loss = 0
    for step in range(steps):
        x = torch.randn(32, 64)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        total_loss += loss
    return total_loss


if __name__ == "__main__":
    print(float(train(300)))
