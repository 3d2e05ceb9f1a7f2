"""The quick subset stays quick: each test not marked ``slow`` whose set-up or call took ``SLOW_S``
seconds or more is named at the end of the run, with the marker to add (a pytest plugin, loaded by
``tests/conftest.py``). A set-up counts: a quick test that shares a slow module fixture (a recording
the slow tests read) pays for it in the quick subset. It reads the same times ``--durations``
prints, and it only tells: a loaded machine makes any test slow once, so nothing fails on a time."""

from __future__ import annotations

import pytest

SLOW_S = 3.0  # a test this slow (its set-up or its call) belongs to the slow set


class QuickCheck:
    """Set-up and call times of the tests not marked slow; the slow ones listed in the terminal summary."""

    def __init__(self, slow_s: float = SLOW_S) -> None:
        self.slow_s = slow_s
        self.too_slow: dict[str, float] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Each test's set-up and call as they are reported (from xdist's workers too); its markers are
        among its keywords. The longer of the two is kept."""
        if report.when in ("setup", "call") and "slow" not in report.keywords and report.duration >= self.slow_s:
            self.too_slow[report.nodeid] = max(report.duration, self.too_slow.get(report.nodeid, 0.0))

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.too_slow:
            return
        terminalreporter.section(f"tests of {self.slow_s:g} s or more not marked slow")
        for nodeid, seconds in sorted(self.too_slow.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{seconds:6.1f}s {nodeid}  (add @pytest.mark.slow)")
