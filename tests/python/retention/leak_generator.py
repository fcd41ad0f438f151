# Leak: a batch generator keeps every batch it made in a list local to its suspended frame.
# expect: batches.made
import torch


def batch_stream(model):
    made = []
    while True:
        x = torch.randn(8, 32)
        made.append(model(x))
        yield x


def train(steps):
    model = torch.nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = batch_stream(model)
    for step in range(steps):
        x = next(batches)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


torch.manual_seed(0)
print(train(300))
