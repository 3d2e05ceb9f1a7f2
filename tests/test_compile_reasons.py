"""dynamo's reasons for a recompile and a graph break, read into a user's words with the fix for each
(``gpudash.core.compile_reasons``): first torch's texts as its versions write them, then the whole
reading in this process — a function compiled with ``backend="eager"`` recompiles and breaks, the
job's compile watch (``gpudash_boot.compile_watch.CompileWatch``) reads what dynamo kept, and gpudash's
intake says it (``gpudash.core.compile_intake``) — on the torch the CI installs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from gpudash.boot.gpudash_boot import compile_watch
from gpudash.core.compile_intake import SAID, CompileIntake, function_words
from gpudash.core.compile_note import CompileNote, quiet
from gpudash.core.compile_reasons import (
    BRANCH,
    CALL,
    DTYPE,
    ITEM,
    MODE,
    NUMBER,
    PRINT,
    RANGE,
    SHAPE,
    STRIDE,
    graph_break,
    recompile_reason,
)
from gpudash.core.compile_table import COMPILED, GRAPH_BREAK, RECOMPILE, RECOMPILE_LIMIT, CompileTable
from gpudash.core.events import Event

SOURCE = "  # return x * n  # mp/train.py:5 in f"


@pytest.mark.parametrize(
    ("raw", "words", "kind"),
    [
        ("0/0: tensor 'x' size mismatch at index 0. expected 64, actual 96", "dim 0 of x: 64 → 96", SHAPE),
        ("1/3: tensor 'L['x']' size mismatch at index 1. expected 12, actual 7", "dim 1 of x: 12 → 7", SHAPE),
        ("0/6: tensor 'x' stride mismatch at index 0. expected 1, actual 3", "stride 0 of x: 1 → 3", STRIDE),
        ("0/5: tensor 'x' rank mismatch. expected 3, actual 2", "the number of dims of x: 3 → 2", SHAPE),
        ("0/1: tensor 'x' dtype mismatch. expected Float, actual Half", "the dtype of x: Float → Half", DTYPE),
        ("0/3: GLOBAL_STATE changed: grad_mode ", "grad mode changed", MODE),
        ("1/2: GLOBAL_STATE changed: autocast(cpu)_enabled ", "autocast(cpu) enabled changed", MODE),
        ("1/0: G['lr'] == 0.001" + SOURCE, "the float lr changed (was 0.001)", NUMBER),
        ("0/0: n == 2" + SOURCE, "the int n changed (was 2)", NUMBER),
        (
            "0/1: 2 <= L['idx'].size()[1] <= 319  # T = idx.shape[1]  # /home/me/lm/job_compiled_lm.py:44 in forward "
            "(user code shown is first use of this value--the guard itself is not due user code but due to 0/1 "
            "specialization in the framework; to avoid specialization try torch._dynamo.mark_unbacked(tensor, dim))",
            "dim 1 of idx went past 319, the range the dynamic graph was built for (2 to 319)",
            RANGE,
        ),
        (
            "0/2: 2 <= L['x'].size()[0]",
            "dim 0 of x went under 2, the range the dynamic graph was built for (2 and up)",
            RANGE,
        ),
        (
            "1/1: ___stack0 == -0.4239118695259094" + SOURCE,
            "a number read off a tensor changed (was -0.4239118695259094)",
            ITEM,
        ),
    ],
)
def test_a_recompiles_reason_reads_in_a_users_words(raw: str, words: str, kind: str) -> None:
    reason = recompile_reason(raw)
    assert (reason.words, reason.kind) == (words, kind)


def note(e: Event) -> CompileNote:
    """A compile event's typed facts."""
    assert isinstance(e.data, CompileNote), e
    return e.data


def test_a_guard_read_as_torch_wrote_it_is_cut_between_words_never_mid_path() -> None:
    path = "/home/me/projects/some/deep/folder/of/theirs/" * 4 + "train.py:44"
    raw = "0/4: Eq(Mod(s0*s1, 64), 0) and Ne(s2, 1) and " + "Ne(s3, 1) and " * 12 + f"Ne(s9, 1)  # x = y  # {path} in f"
    words = recompile_reason(raw).words
    assert len(words) <= 162 and words.endswith(" …") and "/home/me" not in words, words
    assert words.startswith("Eq(Mod(s0*s1, 64), 0) and Ne(s2, 1)")


def test_a_dynamic_graphs_range_names_the_dim_and_how_to_widen_it() -> None:
    past = recompile_reason("0/1: 2 <= L['idx'].size()[1] <= 319  # T = idx.shape[1]  # lm.py:44 in forward")
    assert (past.code, past.name, past.dim) == ("T = idx.shape[1]", "idx", 1)
    assert (
        "pad idx to a few bucket lengths" in past.fix and "torch._dynamo.mark_dynamic(idx, 1, min=…, max=…)" in past.fix
    )
    under = recompile_reason("0/2: 2 <= L['x'].size()[0]")
    assert "torch._dynamo.mark_unbacked(x, 0)" in under.fix


def test_a_changing_size_names_its_cause_without_its_values_and_the_call_that_fixes_it() -> None:
    first, second = (
        recompile_reason("0/0: tensor 'x' size mismatch at index 0. expected 64, actual 96"),
        recompile_reason("0/1: tensor 'x' size mismatch at index 0. expected 96, actual 128"),
    )
    assert first.key == second.key == "dim 0 of x changes"
    assert "torch._dynamo.mark_dynamic(x, 0)" in first.fix and "dynamic=True" in first.fix
    lr = recompile_reason("1/0: G['lr'] == 0.001")
    assert lr.key == "the float lr changed" and "torch.tensor" in lr.fix


@pytest.mark.parametrize(
    ("message", "where", "words", "kind"),
    [
        (
            "Graph break in user code at /tmp/train.py:7\nGraph Break Reason: Unsupported Tensor.item() call with "
            "capture_scalar_outputs=False\n  Explanation: Dynamo does not support tracing `Tensor.item()`",
            ("/tmp/train.py", 7),
            "Tensor.item() (a number read off a tensor)",
            ITEM,
        ),
        (
            "Graph break in user code at /tmp/train.py:8\nGraph Break Reason: Data-dependent branching\n"
            "  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`).",
            ("/tmp/train.py", 8),
            "a branch on a tensor's value",
            BRANCH,
        ),
        (
            "Graph break in user code at /tmp/train.py:14\nGraph Break Reason: Encountered graph break when "
            "attempting to trace CALL: a function call, e.g. f(x, y):\n\nFailed to trace builtin operator\n"
            "  Explanation: Dynamo does not know how to trace builtin operator `print` with argument types ['str']",
            ("/tmp/train.py", 14),
            "print()",
            PRINT,
        ),
        (
            "Graph break (user stack suppressed due to duplicate graph break) in user code at /tmp/train.py:11\n"
            "Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call\n\n"
            "Attempted to call function marked as skipped\n"
            "  Explanation: Dynamo does not know how to trace the builtin `time.sleep.` This function is either",
            ("/tmp/train.py", 11),
            "a call dynamo cannot trace: time.sleep",
            CALL,
        ),
        (  # torch 2.4's wording
            'Graph break: Tensor.item from user code at:\n  File "/tmp/train.py", line 9, in forward\n    s = y.item()',
            ("/tmp/train.py", 9),
            "Tensor.item() (a number read off a tensor)",
            ITEM,
        ),
    ],
)
def test_a_graph_break_reads_its_line_and_its_reason(
    message: str, where: tuple[str, int], words: str, kind: str
) -> None:
    said = graph_break(message)
    assert ((said.file, said.line), said.words, said.kind) == (where, words, kind)


def test_a_resumed_frame_is_named_after_the_function_and_line_it_resumes() -> None:
    assert function_words("torch_dynamo_resume_in_forward_at_88", 88) == ("forward after line 88", 88)
    assert function_words("forward", 12) == ("forward", 12)


# -- the whole reading, in this process ----------------------------------------------------------------
@pytest.fixture
def watched() -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """A compile watch as a job's hooks install it, its messages kept; dynamo's state reset around it."""
    torch._dynamo.reset()
    torch._dynamo.utils.clear_compilation_metrics()
    sent: list[dict[str, Any]] = []
    watch = compile_watch.CompileWatch(sent.append, lambda: 0)
    watch.install()
    yield watch, sent
    watch.uninstall()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()  # a later test of this process must not see a job that compiled
    torch._dynamo.utils.clear_compilation_metrics()


def _said(sent: list[dict[str, Any]]) -> tuple[list[Any], CompileTable]:
    intake = CompileIntake()
    events = [e for m in sent for e in intake.events(m, 0.0)]
    return events, intake.table


def test_a_changing_batch_length_recompiles_with_its_sizes_and_its_functions_line(
    watched: tuple[Any, list[dict[str, Any]]],
) -> None:
    watch, sent = watched

    def scale(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2

    line = scale.__code__.co_firstlineno
    compiled = torch.compile(scale, backend="eager", dynamic=False)
    for step, n in enumerate((64, 64, 96, 96), start=1):
        compiled(torch.randn(n, 4))
        watch.at_step(step)
    events, table = _said(sent)
    assert [e.what for e in events] == [COMPILED, RECOMPILE]
    recompile = events[1]
    assert note(recompile).reason == "dim 0 of x: 64 → 96"
    assert (note(recompile).fn, note(recompile).line) == ("scale", line)
    assert recompile.message.startswith(f"recompile 1 of scale (test_compile_reasons.py:{line}): dim 0 of x: 64 → 96")
    (row,) = table.functions.values()
    assert (row.compiles, row.recompiles, row.reasons) == (2, 1, {"dim 0 of x changes": 1})
    assert row.seconds > 0
    assert "; 1 recompile (dim 0 of x changes ×1)" in table.summary()  # one: said so
    assert ", 1 recompile (dim 0 of x changes ×1)" in table.lines()[0]


def test_a_float_read_off_a_tensor_breaks_the_graph_at_its_line_and_nothing_reaches_stderr(
    watched: tuple[Any, list[dict[str, Any]]], capfd: pytest.CaptureFixture[str]
) -> None:
    watch, sent = watched

    def spread(x: torch.Tensor) -> torch.Tensor:
        s = x.std().item()
        return x / (1.0 + s)

    at = spread.__code__.co_firstlineno + 1
    compiled = torch.compile(spread, backend="eager")
    compiled(torch.randn(8))
    watch.at_step(1)
    events, table = _said(sent)
    (broke,) = [e for e in events if e.what == GRAPH_BREAK]
    assert (note(broke).line, note(broke).reason) == (at, "Tensor.item() (a number read off a tensor)")
    assert broke.message.startswith(f"graph break at test_compile_reasons.py:{at}: Tensor.item()")
    assert {f.name for f in table.functions.values()} == {"spread", f"spread after line {at}"}
    assert "Graph break in user code" not in capfd.readouterr().err  # gpudash's handler alone heard it


def test_a_function_past_the_recompile_limit_is_told_to_run_uncompiled(
    watched: tuple[Any, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    watch, sent = watched
    name = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
    monkeypatch.setattr(torch._dynamo.config, name, 2)

    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    compiled = torch.compile(double, backend="eager", dynamic=False)
    for step, n in enumerate((4, 5, 6, 7), start=1):
        compiled(torch.randn(n))
        watch.at_step(step)
    events, table = _said(sent)
    (limit,) = [e for e in events if e.what == RECOMPILE_LIMIT]
    assert limit.message.startswith("double (test_compile_reasons.py:")
    assert "hit the recompile limit: it runs uncompiled (eager) from here on" in limit.message
    assert "dim 0 of x" in limit.message
    assert [f.limit for f in table.functions.values()] == [True]


def test_recompiles_between_two_reads_each_keep_their_own_sizes_and_a_read_is_cut_into_small_messages(
    watched: tuple[Any, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step that recompiled many times (a read after 30 new lengths): every recompile with its own
    sizes, sent in messages of at most ``PER_MESSAGE`` compiles (a datagram stays small)."""
    watch, sent = watched
    name = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
    monkeypatch.setattr(torch._dynamo.config, name, 64)

    def halve(x: torch.Tensor) -> torch.Tensor:
        return x / 2

    compiled = torch.compile(halve, backend="eager", dynamic=False)
    for n in range(4, 34):
        compiled(torch.randn(n))
    watch.at_step(1)
    limit = compile_watch.PER_MESSAGE
    assert len(sent) >= 3 and all(len(m["compiles"]) <= limit for m in sent)
    events, table = _said(sent)
    reasons = [note(e).reason for e in events if e.what == RECOMPILE]
    assert reasons == [f"dim 0 of x: {n} → {n + 1}" for n in range(4, 33)]
    (row,) = table.functions.values()
    assert (row.compiles, row.recompiles) == (30, 29)


def test_after_torch_dynamo_reset_the_compiles_are_still_read(watched: tuple[Any, list[dict[str, Any]]]) -> None:
    """``torch._dynamo.reset()`` starts dynamo's compile ids again: what compiles after it is read."""
    watch, sent = watched

    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    torch.compile(twice, backend="eager", dynamic=False)(torch.randn(4))
    watch.at_step(1)
    torch._dynamo.reset()
    compiled = torch.compile(twice, backend="eager", dynamic=False)
    compiled(torch.randn(4))
    compiled(torch.randn(5))
    watch.at_step(2)
    events, _ = _said(sent)
    assert [e.what for e in events] == [COMPILED, COMPILED, RECOMPILE]
    assert note(events[-1]).reason == "dim 0 of x: 4 → 5"


def test_a_watch_begun_after_a_compile_says_only_its_own(watched: tuple[Any, list[dict[str, Any]]]) -> None:
    """A step loop run in a process that compiled before it (a benchmark's, a test's) reads only
    what compiles during it (``CompileWatch.skip_earlier``)."""

    def plus(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    compiled = torch.compile(plus, backend="eager", dynamic=False)
    compiled(torch.randn(4))
    later: list[dict[str, Any]] = []
    watch = compile_watch.CompileWatch(later.append, lambda: 0)
    watch.skip_earlier()
    watch.install()
    watch.at_step(1)
    assert [c for m in later for c in m["compiles"]] == []
    compiled(torch.randn(5))
    watch.at_step(2)
    events, _ = _said(later)
    assert [note(e).reason for e in events] == ["dim 0 of x: 4 → 5"]
    watch.uninstall()


def test_past_the_first_recompiles_each_new_cause_is_still_said_once() -> None:
    intake = CompileIntake()
    first = {"id": "0/0", "fn": "forward", "file": "/w/lm.py", "line": 40, "s": 0.5}
    said = [e for e in intake.events({"compiles": [first]}, 1.0) if not quiet(e)]
    for n in range(1, 10):  # nine recompiles of one cause: its length changes
        why = f"0/{n - 1}: tensor 'x' size mismatch at index 1. expected {60 + n}, actual {61 + n}"
        said += [
            e for e in intake.events({"compiles": [{"id": f"0/{n}", "why": why, "s": 0.2}]}, 1.0 + n) if not quiet(e)
        ]
    assert len([e for e in said if e.what == RECOMPILE]) == SAID + 1  # then quiet: the CSV and run.json count them
    range_why = "0/9: 2 <= L['x'].size()[1] <= 319  # T = x.shape[1]  # /w/lm.py:44 in forward"
    late = intake.events({"compiles": [{"id": "0/10", "why": range_why, "s": 0.2}]}, 20.0)
    (event,) = late
    assert not quiet(event) and "dim 1 of x went past 319" in event.message  # a new cause: said
    again = intake.events({"compiles": [{"id": "0/11", "why": range_why, "s": 0.2}]}, 21.0)
    assert quiet(again[0])  # said before: counted quietly
