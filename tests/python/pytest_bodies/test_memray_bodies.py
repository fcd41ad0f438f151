"""The bodies of bodies.py under pytest-memray's limit_leaks, for the side-by-side comparison with plateau's plugin
(bench/pytest_plugins.sh): run with `pytest --memray`; the body is called BODY_LOOPS times inside the test (1: the
test as written; 200: the loop pytest-memray's users write by hand, the steps plateau's plugin runs), and the test
fails when what it leaves allocated exceeds LEAK_LIMIT ("1 MB" by default)."""
import os

import pytest

import bodies

LOOPS = int(os.environ.get("BODY_LOOPS", "1"))
LIMIT = os.environ.get("LEAK_LIMIT", "1 MB")


@pytest.fixture
def torch_model():
    return bodies.Torch()


@pytest.mark.limit_leaks(LIMIT)
def test_leak_py():
    for _ in range(LOOPS):
        bodies.leak_py()


@pytest.mark.limit_leaks(LIMIT)
def test_plateau_py():
    for _ in range(LOOPS):
        bodies.plateau_py()


@pytest.mark.limit_leaks(LIMIT)
def test_leak_torch(torch_model):
    for _ in range(LOOPS):
        bodies.leak_torch(torch_model)


@pytest.mark.limit_leaks(LIMIT)
def test_plateau_torch(torch_model):
    for _ in range(LOOPS):
        bodies.plateau_torch(torch_model)
