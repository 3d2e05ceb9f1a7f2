"""The compile table (key ``g``): a compiled run's functions with their recompiles' causes and fixes
and its graph breaks by line, live from the run's compile events; a recompile and the recompile
limit are marked on the charts; before any compile, one line says what shows there."""

from __future__ import annotations

from gpudash.core.compile_intake import CompileIntake
from gpudash.core.events import Event
from gpudash.tui.compile_screen import NOTHING, CompileScreen

from .dashboard import report_shown, running

TRAIN = "/home/me/project/train.py"
BREAK = (
    f"Graph break in user code at {TRAIN}:31\nGraph Break Reason: Unsupported Tensor.item() call with "
    "capture_scalar_outputs=False\n  Explanation: Dynamo does not support tracing `Tensor.item()`"
)


def _events() -> list[Event]:
    """What a job's hooks say of a forward compiled, recompiled at a new batch length, its graph
    break, and the rest of it past the recompile limit — as the session's intake says it."""
    compiles = [
        {"id": "0/0", "fn": "forward", "file": TRAIN, "line": 28, "s": 1.5, "why": ""},
        {
            "id": "0/1",
            "fn": "forward",
            "file": TRAIN,
            "line": 28,
            "s": 0.8,
            "why": "0/0: tensor 'x' size mismatch at index 0. expected 64, actual 96",
        },
        {
            "id": "1/8",
            "fn": None,
            "file": None,
            "line": None,
            "s": 0.0,
            "why": "1/7: G['lr'] == 0.001",
            "fail": "Unsupported",
            "fail_why": "Dynamo recompile limit exceeded",
        },
    ]
    intake = CompileIntake()
    first = intake.events({"step": 1, "compiles": [compiles[0]], "breaks": [BREAK]}, 10.0)
    return first + intake.events({"step": 9, "compiles": compiles[1:], "breaks": []}, 11.0)


def _shown(app: object) -> str:
    return report_shown(app, CompileScreen)


async def test_g_shows_each_recompile_by_cause_and_fix_and_each_graph_break_by_line() -> None:
    async with running() as (pilot, app, src):
        await pilot.press("g")
        await pilot.pause()
        assert NOTHING in _shown(app)
        await pilot.press("escape")
        for e in _events():
            src.push(e)
        app.refresh_now()
        await pilot.press("g")
        await pilot.pause()
        text = _shown(app)
        assert "forward" in text and "train.py:28" in text and "dim 0 of x changes (1)" in text
        assert "torch._dynamo.mark_dynamic(x, 0)" in text
        assert "train.py:31" in text and "Tensor.item()" in text
        assert "HIT THE RECOMPILE LIMIT" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, CompileScreen)
        labels = [m.label for m in app.state.markers]
        assert "recompile" in labels and "limit" in labels
