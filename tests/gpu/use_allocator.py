"""plateau.torch.use_allocator() on the real torch with a GPU, for the GPU check (tools/gpu-check.sh, step 4).

Under `plateau run`: switch torch to plateau's caching allocator, train a small MLP for --steps steps, and after
each step compare plateau's statistics (plateau.torch.memory_stats()) with what torch's tensors imply: allocated
bytes = every live CUDA storage rounded up to 512 bytes (torch's and plateau's block rounding) plus what torch
allocates for itself through the allocator and never frees (cuBLAS workspaces): that remainder must be the same at
every step after the first. Then free the model and call plateau.torch.empty_cache(): the statistics before and
after it. --reference: the same loop on torch's own allocator, untraced, for the losses.
Writes one JSON object to --out; exits 77 with one line when torch has no CUDA device.
"""
import argparse
import gc
import json
import sys

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=10)
p.add_argument("--out", required=True)
p.add_argument("--reference", action="store_true")
args = p.parse_args()

result = {"torch": torch.__version__, "reference": args.reference}
if not args.reference:
    import plateau.torch
    result["use_allocator"] = plateau.torch.use_allocator()
    result["library"] = plateau.torch.library_path()
    if not result["use_allocator"]:
        json.dump(result, open(args.out, "w"))
        print("use_allocator: refused (its line above)", file=sys.stderr)
        sys.exit(3)
if not torch.cuda.is_available():
    print("use_allocator: torch %s sees no CUDA device" % torch.__version__, file=sys.stderr)
    sys.exit(77)


def live_storage_bytes():
    """Every distinct live CUDA storage, rounded up to 512 bytes, as the allocator's blocks are."""
    seen = {}
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.Tensor) and o.is_cuda:
                s = o.untyped_storage()
                seen[s.data_ptr()] = s.nbytes()
        except Exception:
            pass
    return sum((n + 511) // 512 * 512 for ptr, n in seen.items() if ptr)


dev = torch.device("cuda", 0)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
gen = torch.Generator(device=dev)
gen.manual_seed(0)
rows = []
for step in range(args.steps):
    x = torch.randn(32, 256, device=dev, generator=gen)           # (B, C) = (32, 256)
    y = torch.randint(0, 10, (32,), device=dev, generator=gen)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    row = {"step": step, "loss": loss.item()}
    if not args.reference:
        s = plateau.torch.memory_stats()
        row.update(expected=live_storage_bytes(), allocated=s.get("allocated_bytes.all.current"),
                   reserved=s.get("reserved_bytes.all.current"), blocks=s.get("allocation.all.current"),
                   device_allocs=s.get("num_device_alloc"), ooms=s.get("num_ooms"))
    rows.append(row)
result["rows"] = rows
if not args.reference:
    # free the model, its optimizer state and the step's tensors: their segments become releasable, and
    # empty_cache must give back exactly those (what torch keeps for itself, cuBLAS workspaces, stays allocated)
    del model, opt, x, y, loss
    gc.collect()
    torch.cuda.synchronize()

    def cache_view():
        s = plateau.torch.memory_stats()
        return {"allocated": s.get("allocated_bytes.all.current"), "reserved": s.get("reserved_bytes.all.current"),
                "releasable": s.get("plateau.releasable_bytes"), "segments": s.get("segment.all.current")}
    result["before_empty_cache"] = cache_view()
    result["empty_cache"] = plateau.torch.empty_cache()
    result["after_empty_cache"] = cache_view()
json.dump(result, open(args.out, "w"))
print("use_allocator: %d steps, loss %.4f -> %.4f" % (args.steps, rows[0]["loss"], rows[-1]["loss"]))
