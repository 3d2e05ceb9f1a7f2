"""The dashboard soak's verdicts (the soak_dashboard benchmark, judged by tests/soaks.py): the
warm-up is left out, then the first window against the last; a slow climb is reported, one fd or
thread coming and going is not."""

from __future__ import annotations

import pytest

from tests.soaks import DashboardRow as Row
from tests.soaks import default_warmup_minutes, slope_per_hour
from tests.soaks import window_verdict as verdict


def _rows(rss: list[float], fds: list[float] | None = None) -> list[Row]:
    """One measurement every half minute."""
    fds = fds or [14.0] * len(rss)
    return [Row(i / 2, {"rss": r, "fds": f}, i, "") for i, (r, f) in enumerate(zip(rss, fds, strict=False))]


def test_growth_in_the_warm_up_is_left_out_and_a_flat_rest_passes() -> None:
    rows = _rows([40.0, 44.0, 48.0, 52.0] + [55.0, 55.2, 55.1, 55.3, 55.2, 55.4, 55.3, 55.5])
    assert verdict(rows, "rss", 2.0, 1.0).startswith("flat within 5%")
    assert verdict(rows, "rss", 0.0, 1.0).startswith("NOT flat")  # without the warm-up it grew


def test_a_steady_climb_after_the_warm_up_is_not_flat() -> None:
    rows = _rows([50.0 + 0.5 * i for i in range(40)])  # +1 MiB a minute
    text = verdict(rows, "rss", 5.0, 5.0)
    assert text.startswith("NOT flat") and "+" in text.rsplit(":", 1)[1]
    assert slope_per_hour(rows, "rss", 5.0) == pytest.approx(60.0)


def test_one_fd_coming_and_going_is_not_growth() -> None:
    rows = _rows([50.0] * 20, fds=[14.0] * 10 + [15.0] * 10)
    assert verdict(rows, "fds", 1.0, 2.0).startswith("flat within ±1")


def test_too_few_measurements_after_the_warm_up_say_so() -> None:
    assert verdict(_rows([50.0, 51.0]), "rss", 5.0, 5.0).startswith("n/a")


def test_a_short_run_gets_a_sixth_of_it_for_the_warm_up_and_the_windows() -> None:
    assert default_warmup_minutes(3.0) == 0.5  # both soaks' default warm-up; the dashboard soak's windows too
    assert default_warmup_minutes(60.0) == 5.0
    assert default_warmup_minutes(30.0) == 5.0
