"""A job plateau did not start, for plateau attach's tests (tests/cli/test_attach.sh): prints "step N" after each
step on stdout (the job's log), keeps host memory and, through the NVML test double's state file, device memory:
  --host   leak: 1 MiB more live host memory every step; plateau: 1 MiB per step for the first 20 steps, then
           none; flat: none
  --device leak / plateau / none: the same shapes of device memory (8 MiB per step), written as this process's
           used memory in the NVML double's state file (--nvml-state), as NVML would report it
  --child  also start a child process (a DataLoader-like worker) that keeps its own memory flat and exits with us
  --wait-for FILE  start stepping once FILE exists (the test attaches first)
Plain Python (no torch), so it runs on any interpreter.
"""
import argparse
import os
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=150)
p.add_argument("--host", choices=["leak", "plateau", "flat"], default="flat")
p.add_argument("--device", choices=["leak", "plateau", "none"], default="none")
p.add_argument("--nvml-state")
p.add_argument("--child", action="store_true")
p.add_argument("--sleep", type=float, default=0.02)
p.add_argument("--wait-for")
args = p.parse_args()

MiB = 1 << 20
kept = []
child = None
if args.child:
    child = subprocess.Popen([sys.executable, "-c", "import sys, time\nx = bytearray(b'w' * (8 << 20))\n"
                              "sys.stdin.read()"], stdin=subprocess.PIPE)
if args.wait_for:
    deadline = time.time() + 60
    while not os.path.exists(args.wait_for) and time.time() < deadline:
        time.sleep(0.01)
dev = 64 * MiB
for step in range(1, args.steps + 1):
    if args.host == "leak" or (args.host == "plateau" and step <= 20):
        kept.append(bytearray(b"x" * MiB))  # touched: resident
    if args.device == "leak" or (args.device == "plateau" and step <= 20):
        dev += 8 * MiB
    if args.nvml_state and args.device != "none":
        tmp = args.nvml_state + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"device 0 total {80 << 30}\npid {os.getpid()} device 0 used {dev}\n")
        os.replace(tmp, args.nvml_state)
    print(f"step {step}", flush=True)
    time.sleep(args.sleep)
if child:
    child.stdin.close()
    child.wait()
print("done", flush=True)
