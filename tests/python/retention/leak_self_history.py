# Leak: an RNN module keeps every hidden state it made in a list attribute (self.history.append(hidden)).
# expect: model.history
import torch


class RNNModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(16, 32, batch_first=True)
        self.head = torch.nn.Linear(32, 16)
        self.history = []

    def forward(self, x):
        out, hidden = self.rnn(x)
        self.history.append(hidden)
        return self.head(out)


torch.manual_seed(0)
model = RNNModel()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(200):
    x = torch.randn(4, 8, 16)
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(len(model.history))
