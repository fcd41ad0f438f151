# Leak: the training function keeps every step's logits in a local list (logits_history.append(logits)).
# expect: logits_history
import torch


def train(steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(65, 32), torch.nn.Linear(32, 65))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    logits_history = []
    for step in range(steps):
        idx = torch.randint(0, 65, (4, 16))
        logits = model(idx)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, 65), idx.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        logits_history.append(logits)
    return len(logits_history)


print(train(300))
