from . import optimizer
from .optimizer import Optimizer, SGD
