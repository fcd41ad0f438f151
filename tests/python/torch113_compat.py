"""Test-only: lets Lightning (1.9 and 2.2) run on Debian's torch 1.13 under Python 3.11 (lightning_trainer.py).

torch 1.13 predates Python 3.11. Its torch.distributed._shard.sharded_tensor.metadata declares a dataclass field
with a dataclass instance as default, which 3.11 refuses ("mutable default ... use default_factory"; torch 2.0
switched to default_factory). Lightning imports that module (pytorch_lightning 1.9 in its own import, for FSDP;
lightning 2.2 when a LightningModule registers its sharded-tensor state-dict hooks), and fails. install() makes
that one module load with default_factory instead. Nothing else changes; on a torch whose source lacks the line,
or on Python < 3.11, it changes nothing.
"""
import importlib.abc
import importlib.machinery
import sys

_NAME = "torch.distributed._shard.sharded_tensor.metadata"
_OLD = b"field(default=TensorProperties())"
_NEW = b"field(default_factory=TensorProperties)"


class _Loader(importlib.machinery.SourceFileLoader):
    def get_data(self, path):
        data = super().get_data(path)
        return data.replace(_OLD, _NEW) if path.endswith(".py") else data

    def get_code(self, fullname):  # compiled from the edited source, never from the cached bytecode of the original
        return compile(self.get_data(self.path), self.path, "exec")


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _NAME:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            spec.loader = _Loader(fullname, spec.origin)
        return spec


def install():
    if sys.version_info >= (3, 11) and _NAME not in sys.modules:
        sys.meta_path.insert(0, _Finder())
