"""Screenshots (s, ctrl+s, the palette) and copying the stats table, on a box without ~/Downloads."""

from __future__ import annotations

import asyncio
import csv
import io
from datetime import datetime
from functools import partial
from pathlib import Path

import pytest

from gpudash.tui.app import GpuDashApp
from gpudash.tui.stats_panel import StatsPanel
from gpudash.tui.widgets import plain_text

from .conftest import palette_titles, run_palette, wait_until
from .dashboard import SIZE, make_app, message, pipelined_after_serial, running_app
from .fakes import FakeSource, run_segment


@pytest.fixture
def headless_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory, and a home without ~/Downloads (as on most GPU servers)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def svgs(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.svg"))


def toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]  # Textual keeps no public list of them


async def test_s_saves_an_svg_in_the_working_directory_and_says_where(headless_home: Path):
    src = FakeSource()
    app = make_app(src, toasts=True)
    async with app.run_test(size=SIZE) as pilot:
        await running_app(pilot, app, src)
        await pilot.press("s")
        await wait_until(pilot, lambda: bool(svgs(headless_home)), "the screenshot file")
        [shot] = svgs(headless_home)
        assert shot.name.startswith("gpudash-encdec-") and shot.read_text().lstrip().startswith("<svg")
        assert "steps/s" in shot.read_text()  # the screen's text is in the picture
        assert str(shot) in message(app)
        assert any(str(shot) in t for t in toasts(app))
        assert not (headless_home.parent / "home" / "Downloads").exists()


@pytest.mark.slow
async def test_ctrl_s_and_the_palette_save_screenshots_too_and_the_builtin_one_is_gone(headless_home: Path):
    src = FakeSource()
    app = make_app(src, wall_clock=lambda: datetime(2026, 1, 2, 3, 4, 5))  # both in the same second
    async with app.run_test(size=SIZE) as pilot:
        await running_app(pilot, app, src)
        titles = palette_titles(app)
        assert "Screenshot" not in titles  # Textual's, which saves to ~/Downloads
        assert "Save a screenshot (SVG) (s)" in titles
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: len(svgs(headless_home)) == 1, "the ctrl+s screenshot")
        await run_palette(pilot, app, "save a screenshot", "Save a screenshot (SVG)")
        await wait_until(pilot, lambda: len(svgs(headless_home)) == 2, "the palette's screenshot")
        # two in the same second get two names; the palette is closed before the picture is taken
        first, second = (headless_home / f"gpudash-encdec-20260102-030405{end}" for end in (".svg", "-2.svg"))
        assert first.exists() and second.exists()
        assert "Search for commands" not in second.read_text()
        assert str(second) in message(app)


async def test_screenshots_go_to_the_record_directory_when_one_is_set(tmp_path: Path):
    src = FakeSource()
    records = tmp_path / "records"
    records.mkdir()
    app = make_app(src, save_dir=str(records))
    async with app.run_test(size=SIZE) as pilot:
        await running_app(pilot, app, src)
        await pilot.press("s")
        await wait_until(pilot, lambda: bool(svgs(records)), "the screenshot in the record directory")
        assert str(records) in message(app)


async def test_a_screenshot_that_cannot_be_written_says_why_and_the_run_goes_on(tmp_path: Path):
    src = FakeSource()
    app = make_app(src, save_dir=str(tmp_path / "missing"))
    async with app.run_test(size=SIZE) as pilot:
        await running_app(pilot, app, src)
        await pilot.press("s")
        await wait_until(pilot, lambda: "could not save the screenshot" in message(app), "the error")
        assert "missing" in message(app)
        src.push(*run_segment(10.0, 12.0, 200.0))
        app.refresh_now()
        assert app.state.time_s >= 11.75


async def changed_run(pilot, app, src) -> None:
    """A run of 200 steps/s, then pipelined at 220: both rows of the stats table are filled."""
    await pipelined_after_serial(pilot, app, src, rate=220.0, steps0=2000)


Copied = dict[str, tuple[str, str, str]]  # by kind: (the clipboard, the stats panel's text, the message line)


def copied_anew(app: GpuDashApp, before: str) -> bool:
    """Whether the clipboard holds something, other than ``before``."""
    return app.clipboard not in ("", before)


async def copy_after_a_changed_run() -> Copied:
    """ "Copy stats as Markdown", then "Copy stats as CSV", from the palette of one changed run."""
    src = FakeSource()
    app = make_app(src)
    copied: Copied = {}
    async with app.run_test(size=SIZE) as pilot:
        await changed_run(pilot, app, src)
        for kind in ("Markdown", "CSV"):
            before = app.clipboard
            await run_palette(pilot, app, f"copy stats as {kind.lower()}", f"Copy stats as {kind}")
            await wait_until(pilot, partial(copied_anew, app, before), "the clipboard")
            copied[kind] = (app.clipboard, plain_text(app.query_one(StatsPanel), 120), message(app))
    return copied


@pytest.fixture(scope="module")
def copied() -> Copied:
    """Both copies of the same table, from one dashboard shared by the two tests below."""
    return asyncio.run(copy_after_a_changed_run())


@pytest.mark.slow  # the first of the two runs the shared dashboard
def test_copy_stats_as_markdown_puts_the_panels_table_on_the_clipboard(copied: Copied) -> None:
    text, panel, said = copied["Markdown"]
    lines = text.splitlines()
    title = "this config: encdec/pipelined bs8 (00:10)   previous: encdec/serial bs8 (00:09)"
    assert lines[0] == title + "   steps/s +10.0% (+10.0 … +10.0%)"
    header = next(line for line in lines if line.startswith("|  | steps/s | samples/s |"))
    rows = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| ")}
    assert "p95 ms" in header and "J/step" in header
    assert "| 220±0 |" in rows["this cfg"] and "| 200±0 |" in rows["prev cfg"]
    assert "+10.0% (+10.0 … +10.0%)" in rows["change"]
    assert "220±0" in panel and "steps/s +10.0% (+10.0 … +10.0%)" in panel  # the title: the headline's interval
    assert "copied as Markdown" in said


@pytest.mark.slow  # the first of the two runs the shared dashboard
def test_copy_stats_as_csv_is_the_same_table_as_csv(copied: Copied) -> None:
    text, _, said = copied["CSV"]
    table = list(csv.DictReader(io.StringIO(text)))
    assert [r["row"] for r in table] == ["now", "this cfg", "prev cfg", "change"]
    by_row = {r["row"]: r for r in table}
    assert by_row["now"]["steps/s"] == "220"
    assert by_row["this cfg"]["steps/s"] == "220±0"
    assert by_row["prev cfg"]["samples/s"] == "1600±0"
    assert by_row["change"]["steps/s"] == "+10.0% (+10.0 … +10.0%)"
    assert "copied as CSV" in said
