"""What the bootstrap (python/sitecustomize.py) runs at interpreter start-up under `plateau run`.

Start-up cost is the point of this file: it imports nothing beyond what the interpreter has already loaded and
installs one entry at the front of sys.meta_path that answers only for the name "torch.optim". A program that never
imports torch pays one string comparison per import (bench/RESULTS.md, "Python bootstrap").
"""
from . import _steps


def start():
    _steps.install()
