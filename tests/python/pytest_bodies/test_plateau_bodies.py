"""The bodies of bodies.py under plateau's plugin (tests/python/test_integrations.py). Expected: the leaks fail, the
plateaus pass, the short one is not decided, the broken one fails with its own error."""
import pytest

import bodies


@pytest.fixture
def torch_model():
    return bodies.Torch()


@pytest.mark.plateau(steps=200)
def test_leak_py():
    bodies.leak_py()


@pytest.mark.plateau(steps=200)
def test_plateau_py():
    bodies.plateau_py()


@pytest.mark.plateau(steps=200)
def test_leak_torch(torch_model):
    bodies.leak_torch(torch_model)


@pytest.mark.plateau(steps=200)
def test_plateau_torch(torch_model):
    bodies.plateau_torch(torch_model)
