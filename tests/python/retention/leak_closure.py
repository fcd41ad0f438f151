# Leak: a closure's cell keeps every loss tensor it is given (a logging helper made by a factory).
# expect: log_loss.losses
import torch


def make_logger():
    losses = []

    def log_loss(loss):
        losses.append(loss)
        return len(losses)
    return log_loss


torch.manual_seed(0)
log_loss = make_logger()
model = torch.nn.Linear(32, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(300):
    loss = model(torch.randn(8, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    n = log_loss(loss)
print(n)
