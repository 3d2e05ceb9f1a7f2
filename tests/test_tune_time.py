"""Where a tune run's or a sweep's time went (``gpudash/sweep/timing.py``): the account from the
events the workload process sends (a compile shows as compiling, not as measuring), and whole
runs on the CPU whose ``time_s`` parts add up to their wall clock."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpudash.core.protocol import Event, EventKind
from gpudash.core.running import Running
from gpudash.sweep.timing import PART_KEYS, TimeLedger, start_warm_up_s, switch_warm_up_s
from tests import printed
from tests.helpers import GPUDASH, timing


def _changed(t: float, what: str, knobs: str) -> Event:
    return Event(t, EventKind.CHANGED, what, running=Running("sync_loss", "fixed", 4, knobs))


def _progress(t: float, what: str = "knobs") -> Event:
    return Event(t, EventKind.PROGRESS, what, message=f"compiling… {t:.0f} s")


def _parts(ledger: TimeLedger, wall_s: float) -> dict[str, float]:
    parts = ledger.as_dict(wall_s)["parts"]
    assert isinstance(parts, dict)
    return parts


# -- the account, from synthetic events --------------------------------------------------------------
def test_a_50_s_compile_shows_as_compiling_not_as_switching_or_measuring() -> None:
    ledger = TimeLedger()
    events = [_progress(t) for t in range(12, 60, 2)] + [_changed(60.2, "knobs", "compile=default")]
    ledger.switched(50.4, 10.0, events, config="fixed+compile")
    ledger.measured(1.6, began_s=60.3, opened_s=60.7)  # --warmup 0.4 s after the change, then a 1.2 s window
    parts = _parts(ledger, 52.5)
    assert parts["compiling"] == pytest.approx(50.2) and parts["switching"] == pytest.approx(0.2)
    assert parts["warming_up"] == pytest.approx(0.4) and parts["measuring"] == pytest.approx(1.2)
    assert parts["other"] == pytest.approx(0.5) and ledger.switch_s["fixed+compile"] == pytest.approx(50.4)
    md = "\n".join(ledger.markdown(52.5, "race"))
    assert "- compiling, capturing, autotuning: 50.2 s (96%)" in md and "- measuring: 1.2 s (2%)" in md


def test_only_the_steps_of_a_switch_that_warm_knobs_up_are_compiling() -> None:
    # knobs off (0.3 s), the variant changed (0.5 s), then compile on (20 s): only the last one warms up
    events = [_changed(0.3, "knobs", "none"), _changed(0.8, "variant", "none"), _changed(20.8, "knobs", "compile")]
    assert switch_warm_up_s(0.0, events) == pytest.approx(20.0)
    # a compile that failed: the engine reported it under way, then refused the change (the old knobs run)
    failed = [_progress(2.0), _progress(4.0), Event(5.0, EventKind.ERROR, "knobs", details={"knobs": "none"})]
    assert switch_warm_up_s(0.0, failed) == pytest.approx(5.0)
    assert switch_warm_up_s(0.0, [_changed(0.4, "batch_size", "amp=bf16")]) == 0.0  # bf16 warms nothing up


def test_the_starts_warm_up_runs_from_its_first_progress_report_and_the_rest_is_starting() -> None:
    started = Event(13.5, EventKind.STARTED, running=Running("sync_loss", "", 0, "compile=default"))
    assert start_warm_up_s([_progress(4.0), _progress(6.0), started]) == pytest.approx(11.5)  # from 2.0 s on
    assert start_warm_up_s([started]) == 0.0  # no report: a warm-up under 2 s stays in the start
    ledger = TimeLedger()
    ledger.split(14.0, "starting", 11.5)
    ledger.split(1.0, "stopping", 5.0)  # never more than the part's own wall clock
    parts = _parts(ledger, 15.2)
    assert parts["starting"] == pytest.approx(2.5) and parts["compiling"] == pytest.approx(12.5)
    assert parts["stopping"] == 0.0 and sum(parts.values()) == pytest.approx(15.2)


# -- whole runs on the CPU --------------------------------------------------------------------------------
def _run(tmp_path: Path, *args: str) -> None:
    r = subprocess.run([*GPUDASH, *args, "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr


def _check_account(meta: dict[str, object], md: str) -> dict[str, float]:
    """The JSON's parts: every key, none negative, adding up to the wall clock; the Markdown's list."""
    account = meta["time_s"]
    assert isinstance(account, dict)
    parts, wall = account["parts"], account["wall"]
    assert list(parts) == list(PART_KEYS) and all(v >= 0 for v in parts.values()), account
    assert sum(parts.values()) == pytest.approx(wall, abs=0.02), account
    assert wall == pytest.approx(meta["elapsed_s"], abs=0.06) and parts["measuring"] > 0, account
    listed = printed.time_account(md)
    assert listed["measuring"] == pytest.approx(parts["measuring"], abs=0.06), md
    return parts


@pytest.mark.slow
def test_a_sweep_that_starts_compiled_says_how_long_it_compiled(tmp_path: Path) -> None:
    _run(tmp_path, "sweep", "-w", "sync_loss", "-v", "fixed+compile", *timing(seconds=0.5, warmup=0.2), "--out", "s")
    out = tmp_path / "s"
    parts = _check_account(json.loads((out / "sweep.json").read_text()), (out / "sweep.md").read_text())
    assert parts["compiling"] > 0 and parts["starting"] > 0  # torch's import, then the compiled build
    assert parts["diagnosing"] == parts["checking_loss"] == 0.0  # tune's parts: none in a sweep


@pytest.mark.slow
def test_a_tune_race_says_where_its_time_went(tmp_path_factory: pytest.TempPathFactory) -> None:
    from tests.test_tune_runs import sync_loss_race

    out, _ = sync_loss_race(tmp_path_factory)  # compile among its knobs (named: raced)
    meta, md = json.loads((out / "tune.json").read_text()), (out / "tune.md").read_text()
    parts = _check_account(meta, md)
    assert parts["diagnosing"] > 0 and parts["switching"] > 0 and parts["warming_up"] > 0, md
    # compile raced (--knobs names it): the switches to it compiled, and its candidates' rows count them
    assert parts["compiling"] > 0 and "compiling, capturing, autotuning" in md, md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "+compile=default`" in line]
    switched = sum(printed.number(printed.cells(row)[-2].removesuffix(" s")) for row in rows)
    assert switched >= parts["compiling"] - 0.05 * len(rows), md  # each row's seconds rounded to 0.1
