"""Stand-in torch.cuda: one device, lazy initialisation at the first tensor (torch.cuda._lazy_init), and
memory_stats raising while a pluggable allocator is current, as torch 2's does."""
_initialized = False


def _lazy_init():
    global _initialized
    _initialized = True


def is_initialized():
    return _initialized


def is_available():
    return True


def device_count():
    return 1


def current_device():
    _lazy_init()
    return 0


def memory_stats_as_nested_dict(device=None):
    if memory._current is not None:
        raise RuntimeError("CUDAPluggableAllocator does not yet support getDeviceStats. If you need it, please "
                           "file an issue describing your use case.")
    return {}


def memory_stats(device=None):
    return memory_stats_as_nested_dict(device)


from . import memory  # noqa: E402
