"""Pure-Python loop whose list grows: each step keeps one row of ints (no torch, no plateau import).
The leaking line is marked LEAK for the test; everything else is per-step churn that is freed."""
import sys

history = []


def train_step(step):
    batch = [float(k) * 0.5 for k in range(20000)]  # per-step work, freed at return
    loss = sum(batch) / len(batch)
    history.append([loss] * 2000)  # LEAK
    return loss


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
for step in range(steps):
    train_step(step)
print("done", len(history))
