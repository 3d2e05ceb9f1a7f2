"""Each host-device sync named by its line (``gpudash.boot.gpudash_boot.sync_sites``): the walk over recorded
stacks (torch, a library, backward, a compiled region, the standard library), the counts and the
bounded table, unreadable sources, the real warnings machinery on the CPU, the explicit waits
(``torch.cuda.synchronize()``, ``Event.synchronize()``), and the table through the engine's loop,
the recording's JSON, ``gpudash report``, ``tune.md`` and ``track(syncs=True)``."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import sysconfig
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from gpudash.boot.gpudash_boot import explicit_waits
from gpudash.boot.gpudash_boot.sync_sites import (
    MAX_CALLER_HOPS,
    TOP_SITES,
    LiveSites,
    SiteCounter,
    live_stack,
    site_of,
    source_line,
)
from gpudash.boot.gpudash_boot.sync_table import Site, SyncTable
from gpudash.boot.gpudash_boot.sync_watch import SYNC_WARNING, SyncWatch
from gpudash.core.protocol import SyncSites
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.rules import diagnose
from gpudash.engine.measure import SyncCounter
from gpudash.recording.record import CsvRecorder
from gpudash.report import sync_md

TORCH = os.path.dirname(torch.__file__)
STDLIB = sysconfig.get_paths()["stdlib"]
SITE_PACKAGES = os.path.dirname(TORCH)
USER = "/home/me/project/train.py"
LOSS = "/home/me/project/their_loss.py"


def _torch(rel: str, line: int = 10, function: str = "f") -> tuple[str, int, str]:
    return (os.path.join(TORCH, rel), line, function)


# -- the walk over recorded stacks --------------------------------------------------------------------------
def test_a_sync_in_a_torch_wrapper_is_the_users_calling_line() -> None:
    stack = [
        (os.path.join(STDLIB, "warnings.py"), 100, "_showwarnmsg"),
        _torch("functional.py", 1033, "_return_output"),
        (LOSS, 31, "loss_fn"),
        (USER, 88, "train_step"),
    ]
    site = site_of(stack)
    assert site is not None and (site.file, site.line, site.function) == (LOSS, 31, "loss_fn")
    assert site.called_from is not None and site.called_from.where == "train.py:88"
    assert site.package is None and not site.backward and not site.compiled


def test_a_sync_in_backward_is_the_backward_line_and_says_so() -> None:
    stack = [_torch("autograd/graph.py", 829, "_engine_run_backward"), _torch("_tensor.py", 626, "backward")]
    site = site_of([*stack, (USER, 88, "train_step")])
    assert site is not None and site.where == "train.py:88" and site.backward


def test_a_sync_inside_another_library_names_its_line_its_package_and_the_users_line() -> None:
    lib = os.path.join(SITE_PACKAGES, "transformers", "models", "gpt2", "modeling_gpt2.py")
    stack = [_torch("nn/modules/module.py"), (lib, 412, "forward"), _torch("nn/modules/module.py"), (USER, 70, "step")]
    site = site_of(stack)
    assert site is not None and site.file == lib and site.line == 412 and site.package == "transformers"
    assert site.called_from is not None and site.called_from.where == "train.py:70"
    assert "in transformers" in site.label() and "from train.py:70" in site.label()


def test_a_sync_under_a_compiled_region_says_so() -> None:
    stack = [("/tmp/torchinductor_me/ab/cabc.py", 40, "call"), _torch("_dynamo/eval_frame.py", 600, "_fn")]
    site = site_of([*stack, (USER, 12, "step")])
    assert site is not None and site.where == "train.py:12" and site.compiled


def test_the_calling_line_is_not_searched_past_gpudash_or_far_out() -> None:
    gpudash_loop = (str(Path(__file__).parents[1] / "gpudash" / "engine" / "loop.py"), 50, "run")
    site = site_of([(LOSS, 31, "loss_fn"), gpudash_loop, (USER, 9, "main")])
    assert site is not None and site.where == "their_loss.py:31" and site.called_from is None
    far = [(LOSS, 31, "loss_fn"), *[_torch("nn/modules/module.py")] * MAX_CALLER_HOPS, (USER, 9, "main")]
    near = [(LOSS, 31, "loss_fn"), *[_torch("nn/modules/module.py")] * (MAX_CALLER_HOPS - 1), (USER, 9, "main")]
    assert site_of(far).called_from is None  # type: ignore[union-attr]
    assert site_of(near).called_from.where == "train.py:9"  # type: ignore[union-attr]


def _both_ways(memo: LiveSites) -> tuple[Site | None, Site | None]:
    frame = sys._getframe(1)  # the "sync" is in the caller, as torch's warning is
    return memo.site(frame), site_of(live_stack(frame))


def _sync_line(memo: LiveSites) -> tuple[Site | None, Site | None]:
    return _both_ways(memo)


_THROUGH: dict[str, Any] = {}  # a function "in torch" that calls back through n frames of its own
exec(
    compile("def through(n, f, *a):\n    return through(n - 1, f, *a) if n else f(*a)\n", _torch("fake.py")[0], "exec"),
    _THROUGH,
)


@pytest.mark.parametrize("max_keys", [4096, 1])
def test_a_remembered_stack_names_the_same_site_as_a_fresh_walk(max_keys: int) -> None:
    memo = LiveSites(max_keys=max_keys)
    through = _THROUGH["through"]
    pairs = []
    for _ in range(3):  # the first round walks, the next ones are remembered
        pairs.append(_sync_line(memo))  # one caller
        pairs.append(_sync_line(memo))  # another caller: another site
        pairs.append(through(1, _sync_line, memo))  # the same first frames, the callers further out
        pairs.append(through(4, _sync_line, memo))
        pairs.append(through(7, _sync_line, memo))
    assert all(remembered == fresh for remembered, fresh in pairs)
    sites = {remembered for remembered, _ in pairs}
    assert len(sites) == 5 and all(s is not None and s.function == "_sync_line" for s in sites)
    assert len({s.called_from for s in sites if s is not None}) == 5


def test_a_stack_of_only_torch_and_the_standard_library_names_its_innermost_frame() -> None:
    stack = [("<frozen importlib._bootstrap>", 1, "x"), _torch("cuda/__init__.py", 985, "synchronize")]
    site = site_of(stack)
    assert site is not None and site.function == "synchronize"
    assert site_of([]) is None


def test_a_helper_called_from_two_places_is_two_sites() -> None:
    helper = (LOSS, 5, "count_valid")
    counter = SiteCounter()
    for _ in range(3):
        counter.add([_torch("_tensor.py"), helper, (USER, 20, "step")])
        counter.add([_torch("_tensor.py"), helper, (USER, 24, "step")])
    table = counter.table(steps=3)
    assert [r.count for r in table.rows] == [3, 3] and table.total == 6 and table.per_step == 2.0
    assert {r.site.called_from.line for r in table.rows if r.site and r.site.called_from} == {20, 24}


# -- counts and the table -----------------------------------------------------------------------------------
def test_a_sync_every_100_steps_reads_as_one_hundredth_of_a_wait_a_step() -> None:
    counter = SiteCounter()
    for step in range(1000):
        if step % 100 == 0:
            counter.add([(USER, 99, "log_loss")])
    table = counter.table(steps=1000)
    assert table.total == 10 and table.rows[0].per_step(1000) == pytest.approx(0.01)
    # the diagnosis does not call such a step sync-bound
    evidence = Evidence(steps=1000, step_ms=5.0, input_ms=0.0, syncs_per_step=0.01, sync_sites=table, gpu_busy_pct=40)
    assert str(diagnose(evidence).bound) != "sync-bound"


def test_the_table_is_bounded_the_top_sites_then_other() -> None:
    counter = SiteCounter(max_tracked=12)
    for line in range(1, 21):  # 20 lines, line n syncing n times
        for _ in range(line):
            counter.add([(USER, line, "step")])
    table = counter.table(steps=10)
    assert len(table.rows) == TOP_SITES + 1 and table.rows[-1].site is None
    assert [r.site.line for r in table.rows[:3] if r.site] == [12, 11, 10]  # lines past 12 were never tracked
    assert sum(r.count for r in table.rows) == table.total == sum(range(1, 21))


def test_a_source_read_when_first_seen_survives_the_file_changing_and_unreadable_ones_have_no_text(
    tmp_path: Path,
) -> None:
    source = tmp_path / "mine.py"
    source.write_text("x = 1\nn = valid.nonzero().shape[0]\n")
    counter = SiteCounter()
    counter.add([(str(source), 2, "loss")])
    source.unlink()  # deleted after it ran
    counter.add([(str(source), 2, "loss")])
    for odd in ("<string>", "<ipython-input-3-abc>", "<frozen runpy>", str(tmp_path / "gone.py")):
        counter.add([(odd, 7, "<lambda>")])
    rows = {r.site.file: r.site for r in counter.table(steps=1).rows if r.site}
    assert rows[str(source)].text == "n = valid.nonzero().shape[0]"
    assert rows["<string>"].text is None and rows[str(tmp_path / "gone.py")].text is None
    assert source_line(str(tmp_path / "gone.py"), 1) is None


# -- the real warnings machinery, on the CPU --------------------------------------------------------------
def _sync_here() -> None:
    warnings.warn(f"{SYNC_WARNING} (a test's stand-in for torch's warning)", UserWarning, stacklevel=1)


def _step_with_two_syncs() -> None:
    _sync_here()
    _sync_here()


def test_the_counter_names_the_lines_of_the_syncs_the_warnings_report() -> None:
    counter = SyncCounter(sites=True)
    counter.install(None)
    try:
        counter.attributing = True
        for _ in range(4):
            _step_with_two_syncs()
        counter.attributing = False
        _sync_here()  # the loop's own: counted, given no site
    finally:
        counter.uninstall()
    assert counter.count == 9 and counter.sites is not None
    table = counter.sites.table(steps=4)
    assert table.total == 8 and [r.count for r in table.rows] == [4, 4]
    site = table.rows[0].site
    assert site is not None and site.file == __file__ and site.function == "_sync_here"
    assert site.text is not None and site.text.startswith("warnings.warn(")
    assert {r.site.called_from.function for r in table.rows if r.site and r.site.called_from} == {
        "_step_with_two_syncs"
    }
    assert counter.explicit_not_counted == "no CUDA device"


def _explicit_waits() -> None:
    """Both explicit waits, as a user writes them (there is no GPU here: each raises, once counted)."""
    with contextlib.suppress(RuntimeError, AssertionError):
        torch.cuda.synchronize()
    with contextlib.suppress(RuntimeError, AssertionError):
        torch.cuda.Event().synchronize()


def test_synchronize_and_event_synchronize_are_counted_at_their_lines_and_put_back() -> None:
    """They raise no sync warning: a wrapper counts each call while a counter runs, and the
    originals are back afterwards (``gpudash.boot.gpudash_boot.explicit_waits``)."""
    original = (torch.cuda.synchronize, torch.cuda.Event.synchronize)
    counter = SyncCounter(sites=True)
    watch = SyncWatch(counter._counted, warnings.showwarning)  # noqa: SLF001 - what install() does on CUDA
    assert explicit_waits.start(torch, watch.waited) is None
    counter.attributing = True
    try:
        _explicit_waits()
    finally:
        explicit_waits.stop(torch, watch.waited)
    assert (torch.cuda.synchronize, torch.cuda.Event.synchronize) == original
    assert counter.count == 2 and counter.sites is not None
    lines = {r.site.line for r in counter.sites.table(steps=1).rows if r.site and r.site.function == "_explicit_waits"}
    source = Path(__file__).read_text().splitlines()
    assert {source[n - 1].strip() for n in lines} == {"torch.cuda.synchronize()", "torch.cuda.Event().synchronize()"}
    _explicit_waits()  # stopped: not counted
    assert counter.count == 2


# -- the table, through the diagnosis, the recording's JSON and the report ---------------------------------
def _table() -> SyncTable:
    counter = SiteCounter()
    for _ in range(3):
        counter.add([(LOSS, 24, "loss_fn"), (USER, 80, "step")])
        counter.add([_torch("autograd/graph.py", 829, "_engine_run_backward"), (USER, 88, "step")])
    return counter.table(steps=3)


def test_the_sync_bound_verdict_names_the_top_lines_and_its_evidence_carries_the_table() -> None:
    evidence = Evidence(steps=3, step_ms=4.0, input_ms=0.0, syncs_per_step=2.0, sync_sites=_table(), gpu_busy_pct=30)
    verdict = diagnose(evidence)
    assert str(verdict.bound) == "sync-bound"
    assert (
        "their_loss.py:24 (1/step, from train.py:80)" in verdict.why
        and "train.py:88 (1/step, in backward)" in verdict.why
    )
    again = Evidence.from_dict(json.loads(json.dumps(evidence.as_dict())))
    assert again.sync_sites == evidence.sync_sites
    sites = verdict.as_dict(evidence)["evidence"]["sync_sites"]  # type: ignore[index]
    assert sites["total"] == 6 and sites["sites"][0]["site"]["file"] == LOSS


def test_a_recording_keeps_each_configurations_table_in_its_json_and_the_report_shows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpudash.cli import main as cli
    from gpudash.core.protocol import RunConfig
    from gpudash.recording.metadata import run_metadata
    from tests.tui.fakes import sample

    meta = run_metadata(RunConfig(workload="sync_loss", variant="sync-heavy", batch_size=8, device="cuda"))
    rec = CsvRecorder(tmp_path / "r.csv", meta)
    for t in (0.5, 1.0, 1.5):
        rec.on_message(sample(t, 100.0, workload="sync_loss", variant="sync-heavy", batch=8, syncs=2.0))
    rec.on_message(SyncSites(1.0, "sync_loss", "sync-heavy", 8, "none", _table()))
    rec.on_message(SyncSites(2.0, "sync_loss", "fixed", 8, "none", SyncTable(steps=40, total=0)))
    on_disk = json.loads((tmp_path / "r.json").read_text())["sync_sites"]  # written at first sight, before close
    assert set(on_disk) == {"sync_loss/sync-heavy bs8", "sync_loss/fixed bs8"}
    rec.close()
    md = "\n".join(sync_md.section(json.loads((tmp_path / "r.json").read_text())["sync_sites"]))
    assert "| 1 | 50% | `their_loss.py:24` (from `train.py:80`) |" in md
    assert "**sync_loss/fixed bs8**: no host-device syncs in the step (40 steps)" in md
    assert cli.main(["report", str(tmp_path / "r.csv"), "--out", str(tmp_path / "rep"), "--json", "-q"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["sync_sites"]["sync_loss/sync-heavy bs8"]["total"] == 6
    assert "their_loss.py:24" in (tmp_path / "rep" / "report.md").read_text()
    # the replay hands the table out after its configuration's first sample (the dashboard's y)
    from gpudash.recording.replay import ReplaySource, read_all

    replayed = read_all(ReplaySource(tmp_path / "r.csv"))
    kinds = [type(m).__name__ for m in replayed]
    first = kinds.index("Sample")
    (sites,) = [m for m in replayed if isinstance(m, SyncSites)]
    assert kinds[first + 1] == "SyncSites" and sites.table == _table()  # the fixed one had no sample: not handed out


def test_a_site_survives_its_round_trip_through_json() -> None:
    site = Site(LOSS, 3, "f", "x.item()", "transformers", Site(USER, 9, "g"), backward=True, compiled=True)
    assert Site.from_dict(json.loads(json.dumps(site.as_dict()))) == site


@pytest.mark.parametrize("interval_s", [0.05, 1e-6])
def test_the_step_loop_sends_the_running_configurations_table_after_its_samples(interval_s: float) -> None:
    """The engine's loop on the CPU, its step syncing once (the stand-in warning): the table comes
    after the samples, one wait a step at this file's line; the loop's own syncs get no site. The
    last table counts every step, also when the last sample came after the last step (a sample
    after every burst, as on a fast machine)."""
    from gpudash.engine.loop import StepLoop
    from workloads.base import WorkloadOptions
    from workloads.factory import build

    w = build("sync_loss", "cpu", WorkloadOptions(variant="fixed", batch_size=2, image_size=16))
    plain_step = w.step

    def step_with_a_sync() -> None:
        plain_step()
        _sync_here()

    w.step = step_with_a_sync  # type: ignore[method-assign]
    got: list[object] = []
    loop = StepLoop(w, emit=got.append, sample_interval_s=interval_s, count_syncs=True)
    loop.run(steps=30)
    w.close()
    tables = [m for m in got if isinstance(m, SyncSites)]
    assert tables and all(t.configuration == "sync_loss/fixed bs2" for t in tables)
    last = tables[-1].table
    assert last.steps == 30 and last.total == 30 and last.per_step == 1.0
    (row,) = last.rows
    assert row.site is not None and row.site.file == __file__ and row.site.function == "_sync_here"
    assert row.site.called_from is not None and row.site.called_from.function == "step_with_a_sync"


def test_track_with_syncs_names_the_lines_in_its_json_and_is_off_by_default(tmp_path: Path) -> None:
    import time

    import gpudash

    with gpudash.track(tmp_path / "on.csv", interval_s=0.05, syncs=True) as tracker:
        for _ in range(20):
            _sync_here()
            tracker.step()
            time.sleep(0.005)
    (entry,) = json.loads((tmp_path / "on.json").read_text())["sync_sites"].values()
    table = SyncTable.from_dict(entry)
    import torch

    # on a GPU box synchronize() is counted too; on the CPU the table says it is not
    assert entry["not_counted"] == ("" if torch.cuda.is_available() else "no CUDA device")
    assert table.steps == 20 and table.total == 20
    site = table.rows[0].site
    assert site is not None and site.file == __file__ and site.function == "_sync_here"
    with gpudash.track(tmp_path / "off.csv", interval_s=0.05) as tracker, warnings.catch_warnings(record=True):
        _sync_here()
        tracker.step()
    assert "sync_sites" not in json.loads((tmp_path / "off.json").read_text())


def test_tune_md_lists_the_sync_table_its_diagnosis_counted() -> None:
    from types import SimpleNamespace

    from gpudash.core.protocol import Event, EventKind
    from gpudash.diagnosis.judge import Findings, judged
    from gpudash.tune.tune_md import sync_lines

    evidence = Evidence(steps=3, step_ms=4.0, input_ms=0.0, syncs_per_step=2.0, sync_sites=_table())
    before = judged(Event(1.0, EventKind.MEASURED, "diagnosis", data=Findings(evidence)), None)
    lines = sync_lines(SimpleNamespace(before=before, after=None))  # type: ignore[arg-type]
    assert lines[0] == "### Host-device syncs by line"
    assert "**the plain run**: 2 waits a step over 3 steps" in lines
    assert any(line.startswith("| 1 | 50% | `train.py:88` (in backward) |") for line in lines), lines


def test_the_cost_benchmark_times_the_walk_on_the_host() -> None:
    """``python -m benchmarks run sync_sites_walk`` runs without a GPU (a tiny run, as CI can)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "sync_sites_walk", "-p", "rounds=2", "-p", "depth=3"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    assert "| sites |" in done.stdout and "naming the line adds" in done.stdout
