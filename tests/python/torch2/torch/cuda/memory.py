"""Stand-in torch.cuda.memory: CUDAPluggableAllocator, change_current_allocator, and empty(nbytes), a CUDA tensor
of nbytes from the current allocator (the pluggable one through its C entry points, else a stand-in native one)."""
import ctypes

from . import _lazy_init, is_initialized

_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)  # (size, device, stream)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)

_current = None      # the CUDAPluggableAllocator in use, None = torch's own
native_live = 0      # blocks torch's own (stand-in) allocator holds
pluggable_calls = 0  # mallocs and frees through the pluggable entry points


class CUDAPluggableAllocator(object):
    def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
        allocator = ctypes.CDLL(path_to_so_file)
        alloc_fn = ctypes.cast(getattr(allocator, alloc_fn_name), ctypes.c_void_p).value
        free_fn = ctypes.cast(getattr(allocator, free_fn_name), ctypes.c_void_p).value
        assert alloc_fn is not None and free_fn is not None
        self._malloc = _MALLOC(alloc_fn)
        self._free = _FREE(free_fn)


def change_current_allocator(allocator):
    global _current
    if is_initialized():
        raise RuntimeError("Can't swap an already initialized allocator")
    _current = allocator


class Tensor(object):
    """A CUDA tensor of nbytes on device 0; freed when collected or by free()."""

    def __init__(self, nbytes):
        global native_live, pluggable_calls
        _lazy_init()
        self.nbytes, self.alloc, self.ptr = nbytes, _current, None
        if self.alloc is None:
            native_live += 1
            self.ptr = 1
            return
        pluggable_calls += 1
        self.ptr = self.alloc._malloc(nbytes, 0, None)
        if not self.ptr:
            raise RuntimeError("CUDA out of memory (stand-in: the pluggable malloc returned NULL)")

    def free(self):
        global native_live, pluggable_calls
        if self.ptr is None:
            return
        if self.alloc is None:
            native_live -= 1
        else:
            pluggable_calls += 1
            self.alloc._free(self.ptr, self.nbytes, 0, None)
        self.ptr = None

    __del__ = free


def empty(nbytes):
    return Tensor(nbytes)
