"""``gpudash report``: recordings and sweeps into report.md, plots and a self-contained HTML page."""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest

from gpudash.cli.main import main
from gpudash.core.protocol import ExitCode
from gpudash.recording.csvformat import RowParser
from gpudash.report.load import load_run
from gpudash.sweep.plan import Configuration, FamilyPlan, SweepPlan, SweepSettings
from gpudash.sweep.report import SweepReport
from gpudash.sweep.results import RepeatResult
from tests.printed import compared, figure, table_rows, verdict
from tests.test_sweep import repeat_result
from tests.tui.make_fixture import record

FIXTURE = Path(__file__).parent / "tui" / "data" / "replay.csv"  # encdec on an H100: three changes


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse errors
        return int(exc.code or 0)


def test_a_recording_gets_a_row_per_segment_with_its_interval_and_the_verdict_on_each_change(tmp_path: Path) -> None:
    had_torch = "torch" in sys.modules
    assert run(["report", str(FIXTURE), "--out", str(tmp_path)]) == 0
    md = (tmp_path / "report.md").read_text()
    rows = table_rows(md, "## Run 1: replay.csv")
    assert [r[1] for r in rows] == [
        "encdec/serial bs8",
        "encdec/pipelined bs8",
        "encdec/pipelined bs16",
        "encdec/serial bs16",
    ]
    assert all((f := figure(r[3])) is not None and f.has_interval for r in rows)  # every mean with its interval
    changes = [compared(r[-1]) for r in rows[1:]]
    assert [c.verdict if c is not None else None for c in changes] == ["faster", "faster", "slower"], rows
    assert [c.metric for c in changes if c is not None] == ["", "samples/s", ""]  # a batch-size change: samples/s
    assert "GPU %" in md and "J/step" in md and "![throughput and GPU utilisation](report.png)" in md
    assert (tmp_path / "report.png").stat().st_size > 10_000 and (tmp_path / "report.svg").stat().st_size > 10_000
    assert not (tmp_path / "report.html").exists()
    assert had_torch or "torch" not in sys.modules


def test_the_report_agrees_with_the_summary_rows_the_recorder_wrote(tmp_path: Path) -> None:
    path = tmp_path / "rec.csv"
    record(path)  # the real CsvRecorder over the synthetic source, with its summary rows
    run_ = load_run(path)
    with open(path, newline="") as f:
        header, *rows = list(csv.reader(f))
    parser = RowParser(header)
    summaries = [dict(zip(header, r, strict=True)) for r in rows if r[0] == "summary"]
    assert len(summaries) == len(run_.configs)  # one per segment, the last one written at the end
    for row, seg in zip(summaries, run_.configs, strict=False):
        assert seg.steps is not None
        assert float(row["steps_per_s"]) == pytest.approx(seg.steps.mean, rel=1e-3)
        assert parser.interval(list(row.values())) == pytest.approx((seg.steps.low, seg.steps.high), rel=1e-3)


def test_the_same_recording_twice_is_no_change_detected(tmp_path: Path) -> None:
    copy = tmp_path / "again.csv"
    copy.write_text(FIXTURE.read_text())
    assert run(["report", str(FIXTURE), str(copy), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    rows = table_rows(md, "## Between runs")
    assert len(rows) == 4 and all(r[2] == "the same" and verdict(r[-1])[0] == "no change detected" for r in rows), rows
    ratios = [compared(r[-2]) for r in rows]  # the ratio with its interval, never ±
    assert all(c is not None and c.has_interval and round(c.ratio, 2) == 1.0 for c in ratios), rows


def sweep_files(out: Path, fixed_rate: float) -> Path:
    """A finished sweep's files from synthetic repeats: sync-heavy at 50 steps/s, fixed at ``fixed_rate``."""
    base = Configuration("sync_loss", "sync-heavy", "sync-heavy", 4, 0)
    fixed = Configuration("sync_loss", "fixed", "fixed", 4, 1)
    fp = FamilyPlan("sync_loss", "Host-device syncs in a masked loss", (base, fixed), seconds=5.0)
    out.mkdir()
    report = SweepReport(SweepPlan((fp,), SweepSettings(repeats=2), out, "gpudash sweep --preset syncs"))
    results: list[RepeatResult] = []
    for repeat in (1, 2):
        results += [
            repeat_result(base, repeat, 50.0, 20.0 * repeat),
            repeat_result(fixed, repeat, fixed_rate, 20.0 * repeat + 10),
        ]
    for r in results:
        report.add_result(r)
    report.add_family(fp, results, [])
    report.finish("done", ExitCode.OK)
    return out / "sweep.csv"


def test_two_sweeps_compare_configuration_by_configuration(tmp_path: Path) -> None:
    before, after = sweep_files(tmp_path / "a", 75.0), sweep_files(tmp_path / "b", 90.0)
    assert run(["report", str(before), str(after), "--out", str(tmp_path / "out"), "--html"]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    rows = {r[0]: r for r in table_rows(md, "## Run 1: sweep.csv")}
    within = compared(rows["sync_loss/fixed bs4"][-1])
    assert within is not None and within.ratio == 1.5 and within.verdict == "faster", rows
    between = {r[0]: r for r in table_rows(md, "## Between runs")}
    fixed, ratio = between["sync_loss/fixed bs4"], compared(between["sync_loss/fixed bs4"][-2])
    assert fixed[2] == "the same" and ratio is not None and ratio.ratio == 1.2 and ratio.has_interval
    assert (
        verdict(fixed[-1])[0] == "faster"
        and verdict(between["sync_loss/sync-heavy bs4"][-1])[0] == "no change detected"
    )
    assert (tmp_path / "out" / "report.svg").stat().st_size > 0


def test_html_is_one_self_contained_file(tmp_path: Path) -> None:
    assert run(["report", str(FIXTURE), "--out", str(tmp_path), "--html"]) == 0
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page and "<svg" in page
    assert "<img" not in page and "<script" not in page  # the plot is inline, nothing runs
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)  # nothing is fetched
    assert "encdec/pipelined bs8" in page


def _truncated(tmp_path: Path) -> Path:
    text = FIXTURE.read_text()
    p = tmp_path / "cut.csv"
    p.write_text(text[: len(text) // 2 + 7])
    return p


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: d / "missing.csv", "no such file"),
        (lambda d: (d / "empty.csv").write_text("") and d / "empty.csv" or d / "empty.csv", "is empty"),
        (lambda d: (d / "other.csv").write_text("a,b\n1,2\n") and d / "other.csv", "not a gpudash CSV"),
        (
            lambda d: (d / "hdr.csv").write_text(FIXTURE.read_text().splitlines()[0] + "\n") and d / "hdr.csv",
            "no throughput samples",
        ),
        (_truncated, "truncated"),
        (lambda d: d, "is a directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    make,
    says: str,
    tmp_path: Path,  # noqa: ANN001
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = make(tmp_path)
    out = tmp_path / "out"
    assert run(["report", str(FIXTURE), str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpudash: error: ") and says in err[0], err
    assert not out.exists()  # every file is read before anything is written


def test_out_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert run(["report", str(FIXTURE), "--out", str(target)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_a_report_without_out_is_the_markdown_on_stdout_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # `gpudash report run.csv`, as the README shows it
    assert run(["report", str(FIXTURE)]) == 0
    said = capsys.readouterr()
    rows = table_rows(said.out, "## Run 1: replay.csv")
    assert [r[1] for r in rows][:2] == ["encdec/serial bs8", "encdec/pipelined bs8"]
    change = compared(rows[1][-1])  # the verdicts; no plot to link
    assert change is not None and change.verdict == "faster" and "![" not in said.out
    assert "--out DIR writes it with its plots" in said.err
    assert list(tmp_path.iterdir()) == []
    assert run(["report", str(FIXTURE), "--html"]) == 2
    assert capsys.readouterr().err.strip() == (
        "gpudash: error: --html writes report.html in a folder: give it one with --out DIR"
    )
