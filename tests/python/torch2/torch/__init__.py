"""A stand-in for torch >= 2.0, for python.torch_allocator (no GPU, and torch 2 is not installable here): only
what plateau.torch and the bootstrap touch. torch.cuda.memory.CUDAPluggableAllocator loads the library and looks up
the named entry points as torch 2's does (ctypes.CDLL, RTLD_LOCAL), and every stand-in CUDA tensor is a block from
the current allocator, malloc'd and freed through those function pointers with the pluggable signatures, so
plateau's real entry points run (over the CUDA driver test double, PLATEAU_LIBCUDA). PL_STANDIN_TORCH_VERSION sets
__version__ (default 2.1.0)."""
import os

__version__ = os.environ.get("PL_STANDIN_TORCH_VERSION", "2.1.0")

from . import cuda, optim  # noqa: E402 (torch imports torch.optim: the bootstrap hooks it)
