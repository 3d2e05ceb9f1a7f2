"""The check that keeps the quick subset quick names a test not marked slow that took too long, in
its call or in a slow fixture's set-up, and not one that is marked (issue 54: the suite's time)."""

from __future__ import annotations

import pytest

from tests import quick_check

pytest_plugins = ["pytester"]


def test_a_slow_test_without_the_marker_is_named_and_a_marked_one_is_not(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    pytester.makepyfile(
        test_sample="""
import time
import pytest

def test_sleepy():
    time.sleep(0.3)

@pytest.fixture(scope="module")
def recording():
    time.sleep(0.3)

def test_reads_a_slow_fixture(recording):
    pass

@pytest.mark.slow
def test_sleepy_and_marked():
    time.sleep(0.3)

def test_quick():
    pass
"""
    )
    plain = ("-p", "no:xdist", "-p", "no:cacheprovider", "-p", "no:textual-snapshot")  # the inner run alone
    result = pytester.runpytest_inprocess(*plain, plugins=[quick_check.QuickCheck(slow_s=0.2)])
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert "test_sample.py::test_sleepy  (add @pytest.mark.slow)" in out
    assert "test_sample.py::test_reads_a_slow_fixture  (add @pytest.mark.slow)" in out
    assert "test_sleepy_and_marked" not in out and "test_quick " not in out
