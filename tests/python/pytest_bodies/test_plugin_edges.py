"""The plugin's other outcomes (tests/python/test_integrations.py): too few steps to decide (a leak; a cache still
filling up), a body that fails at its 5th call, an untraced test beside them, and a bad marker."""
import pytest

import bodies

_n = [0]


@pytest.mark.plateau(steps=40)
def test_short_leak():
    bodies.leak_py()


@pytest.mark.plateau(steps=40, undecided="fail")
def test_short_leak_strict():
    bodies.leak_py()


@pytest.mark.plateau(steps=20)
def test_fails_at_step_5():
    _n[0] += 1
    assert _n[0] < 5, "body broke at call %d" % _n[0]


def test_untraced():
    bodies.leak_py()


@pytest.mark.plateau(stepz=10)
def test_bad_marker():
    pass


@pytest.mark.plateau(steps=80)
def test_cache_still_warming():
    bodies.plateau_py()  # its cache fills over 64 calls: at 80 steps a warmup cannot be excluded yet, never a leak
