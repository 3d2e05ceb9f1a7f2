"""``gpudash report a.csv b.csv``: A/B across recordings — each configuration against its
counterpart (the same one, else the same family and batch size) with the ratio's interval and verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudash.core.protocol import RunConfig
from gpudash.recording.metadata import run_metadata
from gpudash.recording.record import CsvRecorder
from gpudash.tui.demo import SyntheticSource
from tests import printed
from tests.printed import table_rows
from tests.test_report import run


def synthetic(path: Path, variant: str, seconds: float = 20.0) -> Path:
    """A recording of the synthetic encdec run in one variant (pipelined runs faster)."""
    t = [0.0]
    src = SyntheticSource(RunConfig(workload="encdec", variant=variant), gpu=True, clock=lambda: t[0], startup_s=1.0)
    rec = CsvRecorder(str(path), run_metadata(src.config, src.gpu_info, device="cuda:0"))
    src.start()
    while t[0] < seconds:
        t[0] = round(t[0] + 0.25, 2)
        for m in src.poll():
            rec.on_message(m)
    rec.close()
    return path


def test_two_recordings_of_two_variants_are_compared_by_family_and_batch(tmp_path: Path, capsys) -> None:
    a, b = synthetic(tmp_path / "serial.csv", "serial"), synthetic(tmp_path / "pipelined.csv", "pipelined")
    assert run(["report", str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "No configuration" not in md
    (row,) = table_rows(md, "## Between runs")
    config, in_run, against, base_run, _, _, ratio, verdict = row
    assert (config, in_run, against, base_run) == (
        "encdec/pipelined bs8",
        "pipelined.csv",
        "encdec/serial bs8",
        "serial.csv",
    )
    shown = printed.compared(ratio)
    assert shown is not None and shown.low is not None and shown.high is not None and not shown.verdict
    assert printed.verdict(verdict)[0] == "faster"
    assert 1.0 < shown.low <= shown.ratio <= shown.high  # the synthetic pipelined run is faster
    (said,) = printed.versus_lines(capsys.readouterr().err)
    assert (said.name, said.run, said.base, said.base_run) == (config, in_run, against, base_run)
    assert said.compared.verdict == "faster" and (said.compared.low, said.compared.high) == (shown.low, shown.high)


def test_a_baseline_run_is_what_every_other_run_is_compared_with(tmp_path: Path) -> None:
    a = synthetic(tmp_path / "serial.csv", "serial")
    b = synthetic(tmp_path / "pipelined.csv", "pipelined")
    c = synthetic(tmp_path / "serial2.csv", "serial")
    out = tmp_path / "out"
    assert run(["report", str(a), str(b), str(c), "--baseline", str(b), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "## Between runs (against run 2)" in md
    rows = table_rows(md, "## Between runs")
    assert [(r[1], r[3]) for r in rows] == [("serial.csv", "pipelined.csv"), ("serial2.csv", "pipelined.csv")]
    assert all(printed.verdict(r[-1])[0] == "slower" for r in rows)
    assert run(["report", str(a), str(b), "--baseline", str(tmp_path / "nope.csv"), "--out", str(out)]) == 2


def test_another_family_or_batch_size_is_never_paired(tmp_path: Path) -> None:
    a = synthetic(tmp_path / "serial.csv", "serial")
    t = [0.0]
    src = SyntheticSource(RunConfig(workload="encdec", batch_size=16), gpu=True, clock=lambda: t[0], startup_s=1.0)
    rec = CsvRecorder(str(tmp_path / "b16.csv"), run_metadata(src.config, src.gpu_info, device="cuda:0"))
    src.start()
    while t[0] < 20.0:
        t[0] = round(t[0] + 0.25, 2)
        for m in src.poll():
            rec.on_message(m)
    rec.close()
    assert run(["report", str(a), str(tmp_path / "b16.csv"), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "No configuration of a run has a counterpart" in md


@pytest.mark.slow
def test_a_sync_heavy_and_a_fixed_recording_give_the_ratio_with_its_interval(tmp_path: Path, capsys) -> None:
    # a count of steps, not seconds: a loaded machine slows the steps but never empties a recording of
    # them; and enough of them to outlast the warm-up on an idle machine (150 took 0.5 s: all warm-up):
    # 700 take about 2.3 s, whose 1.3 s after the 1 s warm-up hold 13 samples of 0.1 s (an interval needs 8)
    common = ["-w", "sync_loss", "-b", "4", "--image-size", "16", "--device", "cpu", "--steps", "700", "-q"]
    common += ["--sample-interval", "0.1"]
    for variant in ("sync-heavy", "fixed"):
        assert run(["record", str(tmp_path / f"{variant}.csv"), "-v", variant, *common]) == 0
    capsys.readouterr()
    assert run(["report", str(tmp_path / "sync-heavy.csv"), str(tmp_path / "fixed.csv"), "--out", str(tmp_path)]) == 0
    (row,) = table_rows((tmp_path / "report.md").read_text(), "## Between runs")
    assert row[:4] == ["sync_loss/fixed bs4", "fixed.csv", "sync_loss/sync-heavy bs4", "sync-heavy.csv"]
    # a loaded CPU may leave a side without an interval: then the ratio says so, and there is no verdict
    ratio, (verdict, _, _) = printed.compared(row[6]), printed.verdict(row[7])  # (a loaded machine: "⚠ noisy")
    assert ratio is not None and verdict in printed.VERDICTS, row
    assert ratio.has_interval or verdict == "too short", row
    (said,) = printed.versus_lines(capsys.readouterr().err)
    assert (said.name, said.run, said.compared.verdict) == ("sync_loss/fixed bs4", "fixed.csv", verdict)


def test_smoothing_is_a_centred_moving_mean_over_the_window() -> None:
    from gpudash.report.plot import smoothed

    t = [0.5 * i for i in range(11)]  # 0 … 5 s
    step = [0.0] * 5 + [10.0] * 6  # a step at 2.5 s
    assert smoothed(t, step, 0.0) == step  # no window: the raw values
    s = smoothed(t, step, 1.0)  # each point with its neighbours 0.5 s either side
    assert s[0] == 0.0 and s[-1] == 10.0
    assert s[4] == pytest.approx(10.0 / 3) and s[5] == pytest.approx(20.0 / 3)  # the step, spread
    assert all(a <= b for a, b in zip(s, s[1:], strict=False))
    assert smoothed(t, [7.0] * 11, 3.0) == pytest.approx([7.0] * 11)  # a flat line stays flat


def test_the_report_overlays_smoothed_runs_and_refuses_a_negative_window(tmp_path: Path, capsys) -> None:
    a, b = synthetic(tmp_path / "serial.csv", "serial"), synthetic(tmp_path / "pipelined.csv", "pipelined")
    out = tmp_path / "out"
    assert run(["report", str(a), str(b), "--smooth", "2", "--out", str(out)]) == 0
    svg = (out / "report.svg").read_text()
    assert "serial.csv (mean over 2 s)" in svg and "pipelined.csv (mean over 2 s)" in svg  # one legend line each
    assert run(["report", str(a), "--smooth", "-1", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "gpudash: error: argument --smooth: must be 0 or more, got -1"
