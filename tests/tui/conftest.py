"""Helpers for the dashboard tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest


async def wait_until(pilot, cond: Callable[[], bool], what: str = "condition", tries: int = 200) -> None:
    """Let the app process messages until ``cond()`` holds (no fixed sleeps)."""
    for _ in range(tries):
        if cond():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def fixed_clock() -> Callable[[], float]:
    return lambda: 0.0
