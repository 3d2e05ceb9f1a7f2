"""The quick subset stays quick: each test not marked ``slow`` whose run took ``SLOW_S`` seconds or
more is named at the end of the run, with the marker to add (a pytest plugin, loaded by
``tests/conftest.py``). It reads the same call times ``--durations`` prints, and it only tells:
a loaded machine makes any test slow once, so nothing fails on a time."""

from __future__ import annotations

import pytest

SLOW_S = 3.0  # a test this slow (its call) belongs to the slow set


class QuickCheck:
    """Call times of the tests not marked slow; the slow ones listed in the terminal summary."""

    def __init__(self, slow_s: float = SLOW_S) -> None:
        self.slow_s = slow_s
        self.too_slow: dict[str, float] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Each test's call as it is reported (from xdist's workers too); its markers are among its keywords."""
        if report.when == "call" and "slow" not in report.keywords and report.duration >= self.slow_s:
            self.too_slow[report.nodeid] = report.duration

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.too_slow:
            return
        terminalreporter.section(f"tests of {self.slow_s:g} s or more not marked slow")
        for nodeid, seconds in sorted(self.too_slow.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{seconds:6.1f}s {nodeid}  (add @pytest.mark.slow)")
