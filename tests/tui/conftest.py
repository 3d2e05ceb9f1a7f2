"""Helpers for the dashboard tests."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


async def wait_until(pilot, cond: Callable[[], bool], what: str = "condition", timeout_s: float = 30.0) -> None:
    """Let the app process messages until ``cond()`` holds (no fixed sleeps).

    Deadline-based, not a fixed number of tries: a loaded CI machine gets the whole
    ``timeout_s`` of wall time; a passing check returns at once.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if cond():
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await pilot.pause(0.02)


async def run_palette(pilot, app, query: str, title: str) -> None:
    """Type ``query`` into the command palette, wait until ``title`` is among its hits, and pick it."""
    await pilot.press("ctrl+p")
    await pilot.press(*query)
    await wait_until(
        pilot,
        lambda: title in str([o.prompt for o in app.screen.query_one("CommandList").options]),
        "the palette's hits",
    )
    await pilot.press("enter")


def palette_titles(app) -> set[str]:
    """The titles of the commands the palette offers on the screen shown."""
    return {c.title for c in app.get_system_commands(app.screen)}


async def replay_loaded(pilot, app) -> None:
    """Until a replay (without follow) has handed every row of its file to the dashboard."""
    await wait_until(pilot, lambda: app.source_ready and not app.source.alive, "the recording to be read")


@pytest.fixture
def fixed_clock() -> Callable[[], float]:
    return lambda: 0.0
