"""``gpudash sweep`` short of a real sweep: the order, the statistics, the files and reading them back,
bad input (the measuring loop against a scripted session: tests/test_sweep_loop.py; real sweeps:
tests/test_sweep_runs.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpudash.cli.main import main
from gpudash.core.protocol import ExitCode, GpuSample, Sample
from gpudash.stats.fmt import fmt_pm
from gpudash.sweep.arguments import build_parser
from gpudash.sweep.csv_rows import CSV_COLUMNS
from gpudash.sweep.plan import Configuration, FamilyPlan, SweepPlan, SweepSettings, labels, plan_from_args, schedule
from gpudash.sweep.report import SweepReport
from gpudash.sweep.results import RepeatResult, summarize
from gpudash.sweep.window import Window
from tests.helpers import needs_two_cpus, timing
from workloads.registry import FAMILIES

ROOT = Path(__file__).resolve().parents[1]
TINY = [*timing(repeats=2, seconds=1.5), "-q"]


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse errors
        return int(exc.code or 0)


def rows(out: Path, kind: str) -> list[dict[str, str]]:
    with open(out / "sweep.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r["row_kind"] == kind]


# -- the order -------------------------------------------------------------------------------------
def test_schedule_interleaves_each_configuration_once_per_round_as_the_seed_says() -> None:
    rounds = schedule(4, 5, seed=7)
    assert len(rounds) == 5
    assert all(sorted(r) == [0, 1, 2, 3] for r in rounds)  # every configuration once a round
    assert schedule(4, 5, seed=7) == rounds  # the seed decides
    assert len({tuple(r) for r in rounds}) > 1  # shuffled per round, not one fixed order
    assert any(schedule(4, 5, seed=s) != rounds for s in range(3))


def test_labels_number_a_variant_listed_again() -> None:
    assert labels(["fixed", "sync-heavy", "fixed", "fixed"]) == ["fixed", "sync-heavy", "fixed#2", "fixed#3"]


def test_variants_the_device_cannot_run_are_skipped_with_the_catalogs_reason(tmp_path: Path) -> None:
    args = build_parser().parse_args(["--preset", "pipelining", "--device", "cpu", "--out", str(tmp_path)])
    plan = plan_from_args(args, [])
    (fp,) = plan.families
    assert [(c.label, c.batch_size) for c in fp.configurations] == [("serial", 8), ("serial", 16), ("serial", 32)]
    assert plan.skipped == (f"{FAMILIES['encdec'].variant('pipelined').refusal('cpu')} (on cpu)",)


def test_the_input_pipeline_preset_measures_longer_unless_told(tmp_path: Path) -> None:
    def timing(*argv: str) -> dict[str, tuple[float, float]]:
        plan = plan_from_args(build_parser().parse_args([*argv, "--device", "cpu", "--out", str(tmp_path)]), [])
        return {fp.family: (fp.seconds, fp.warmup) for fp in plan.families}

    preset = timing("--preset", "all")
    assert preset["input_pipeline"] == (30.0, 10.0)  # bursty batches: long windows after the refill
    assert preset["sync_loss"] == preset["encdec"] == (10.0, 2.0)
    assert set(timing("--preset", "all", "--seconds", "4", "--warmup", "1").values()) == {(4.0, 1.0)}


def test_the_beyond_preset_adds_knob_combinations_and_a_cpu_skips_the_cuda_ones(tmp_path: Path) -> None:
    from gpudash.sweep.plan import family_plan
    from gpudash.sweep.presets import BEYOND, PRESETS

    def plan(*argv: str) -> SweepPlan:
        return plan_from_args(build_parser().parse_args([*argv, "--device", "cpu", "--out", str(tmp_path)]), [])

    assert BEYOND not in PRESETS["all"] and not set(BEYOND) & set(PRESETS["all"])  # --preset all unchanged
    on_cpu = plan("--preset", "beyond")
    configs = {(c.family, c.label, c.batch_size): c.knobs for fp in on_cpu.families for c in fp.configurations}
    assert configs[("encdec", "serial+compile", 32)] == "compile=default"
    assert ("sync_loss", "fixed+cuda_graph", 8) not in configs and ("sync_loss", "fixed", 32) in configs
    assert "sync_loss fixed+cuda_graph: knob cuda_graph needs CUDA" in " ".join(on_cpu.skipped)
    assert {fp.family: (fp.seconds, fp.warmup) for fp in on_cpu.families}["input_pipeline"] == (30.0, 10.0)
    skipped: list[str] = []
    on_gpu = [family_plan(entry, "cuda", skipped) for entry in BEYOND]  # the plan alone: no GPU needed
    assert not skipped and [len(fp.configurations) for fp in on_gpu if fp] == [12, 10, 5, 4]


def test_switches_turn_knobs_off_before_the_variant_changes_and_on_after() -> None:
    from gpudash.core.protocol import SetBatchSize, SetKnobs, SetVariant
    from gpudash.sweep.driver import switch_controls

    assert switch_controls(("fixed", 8, "none"), ("fixed", 8, "none")) == []
    assert switch_controls(("fixed", 8, "none"), ("fixed", 8, "amp=bf16")) == [SetKnobs("amp=bf16")]
    assert switch_controls(("fixed", 8, "cuda_graph=on"), ("sync-heavy", 8, "none")) == [
        SetKnobs("none"),
        SetVariant("sync-heavy"),
    ]  # sync-heavy refuses cuda_graph
    assert switch_controls(("sync-heavy", 8, "amp=bf16"), ("fixed", 32, "amp=bf16,cuda_graph=on")) == [
        SetVariant("fixed"),
        SetBatchSize(32),
        SetKnobs("amp=bf16,cuda_graph=on"),
    ]
    assert switch_controls(("serial", 8, "amp=bf16,compile=default"), ("pipelined", 8, "amp=bf16,cuda_graph=on")) == [
        SetKnobs("amp=bf16"),
        SetVariant("pipelined"),
        SetKnobs("amp=bf16,cuda_graph=on"),
    ]


# -- the figures, from synthetic messages -------------------------------------------------------------
def _sample(t: float, steps: int, rate: float, variant: str = "fixed", batch: int = 4) -> Sample:
    return Sample(
        time_s=t,
        workload="sync_loss",
        variant=variant,
        batch_size=batch,
        steps=steps,
        samples=steps * batch,
        interval_s=0.1,
        steps_per_s=rate,
        samples_per_s=rate * batch,
        step_ms_p50=None,
        step_ms_p95=None,
        syncs_per_step=0.0,
    )


def repeat_result(config: Configuration, repeat: int, rate: float, t0: float, *, power: float = 100.0) -> RepeatResult:
    """A repeat of 5 s at ``rate`` steps/s (±1% wobble) with NVML ticks every 0.25 s at ``power`` W."""
    samples = tuple(
        _sample(t0 + 0.1 * (i + 1), int(rate * 0.1 * (i + 1)), rate * (1 + 0.01 * ((i % 3) - 1)), config.variant)
        for i in range(50)
    )
    gpu = tuple(
        GpuSample(time_s=t0 + 0.25 * (i + 1), gpu_util_pct=90.0, power_w=power, energy_j=power * 0.25 * (i + 1))
        for i in range(20)
    )
    return RepeatResult(config, repeat, samples, gpu)


def test_window_keeps_only_its_configuration_after_warm_up_until_full() -> None:
    config = Configuration("sync_loss", "fixed", "fixed", 4, 0)
    w = Window(config, start_s=1.0, seconds=0.3)
    w.offer(_sample(1.05, 10, 50.0))  # began in the warm-up
    w.offer(_sample(1.2, 12, 50.0, variant="sync-heavy"))  # another configuration
    w.offer(GpuSample(time_s=0.9, power_w=1.0))  # before the window
    for i in range(5):
        w.offer(_sample(1.2 + 0.1 * i, 20 + i, 50.0))
        w.offer(GpuSample(time_s=1.25 + 0.1 * i, power_w=2.0, energy_j=float(i)))
    r = w.result(1)
    assert [s.time_s for s in r.samples] == pytest.approx([1.2, 1.3, 1.4])
    assert all(g.time_s <= 1.4 for g in r.gpu) and r.gpu  # NVML ticks inside the window only


def test_summaries_compare_with_the_first_configuration_at_the_same_batch_size() -> None:
    base = Configuration("sync_loss", "sync-heavy", "sync-heavy", 4, 0)
    fixed = Configuration("sync_loss", "fixed", "fixed", 4, 1)
    again = Configuration("sync_loss", "fixed", "fixed#2", 4, 2)
    results = [
        repeat_result(base, 1, 50.0, 0.0, power=200.0),
        repeat_result(fixed, 1, 75.0, 10.0),
        repeat_result(again, 1, 75.0, 20.0),
        repeat_result(base, 2, 50.0, 30.0, power=200.0),
        repeat_result(again, 2, 75.0, 40.0),
        repeat_result(fixed, 2, 75.0, 50.0),
    ]
    s_base, s_fixed, s_again = summarize((base, fixed, again), results)
    assert s_base.is_base and s_base.comparison is None
    assert s_fixed.comparison is not None and s_fixed.comparison.ratio == pytest.approx(1.5, rel=0.01)
    assert s_fixed.comparison.verdict.value == "faster"
    assert s_again.base == base and s_fixed.steps is not None and s_fixed.steps.has_interval
    # J/step = energy over steps: 200 W at 50 steps/s is 4 J/step; 100 W at 75 steps/s 1.33 J/step
    assert results[0].joules_per_step == pytest.approx(4.0, rel=0.05)
    joules, util = s_fixed.stats["joules_per_step"], s_fixed.stats["gpu_util_pct"]
    assert joules is not None and joules.mean == pytest.approx(100 / 75, rel=0.05)
    assert util is not None and util.mean == pytest.approx(90.0)


def test_report_files_from_synthetic_results(tmp_path: Path) -> None:
    base = Configuration("sync_loss", "sync-heavy", "sync-heavy", 4, 0)
    fixed = Configuration("sync_loss", "fixed", "fixed", 4, 1)
    fp = FamilyPlan("sync_loss", "Host-device syncs in a masked loss", (base, fixed), seconds=5.0)
    plan = SweepPlan((fp,), SweepSettings(repeats=2), tmp_path, "gpudash sweep --preset syncs")
    report = SweepReport(plan)
    results = [
        repeat_result(base, 1, 50.0, 0.0),
        repeat_result(fixed, 1, 75.0, 10.0),
        repeat_result(fixed, 2, 75.0, 20.0),
        RepeatResult(base, 2, error="CUDA out of memory"),
    ]
    for r in results:
        report.add_result(r)
    report.add_family(fp, results, [])
    report.finish("done", ExitCode.OK)
    with open(tmp_path / "sweep.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == CSV_COLUMNS
    assert [r["row_kind"] for r in table] == ["repeat"] * 4 + ["summary"] * 2
    assert table[3]["error"] == "CUDA out of memory" and table[4]["error"] == "CUDA out of memory"
    assert float(table[0]["joules_per_step"]) == pytest.approx(2.0, rel=0.05)
    md = (tmp_path / "sweep.md").read_text()
    assert "| fixed | 74.9" in md and "1.500× [1.498–1.502]" in md and "| faster |" in md and "90.0" in md
    assert (tmp_path / "sweep.png").stat().st_size > 0 and (tmp_path / "sweep.svg").stat().st_size > 0


def test_fmt_pm_rounds_the_mean_to_the_interval() -> None:
    from gpudash.stats.comparison import Estimate

    assert fmt_pm(Estimate(48.234, 46.964, 49.504, 10)) == "48.2 ± 1.3"
    assert fmt_pm(Estimate(0.567, 0.5627, 0.5713, 10)) == "0.5670 ± 0.0043"
    assert fmt_pm(Estimate(12.0, None, None, 2)) == "12.0 (no CI)"
    assert fmt_pm(None) == "–"


@pytest.mark.parametrize(
    ("command_line", "says"),
    [
        ("-w nope", "unknown workload 'nope'"),
        ("-w sync_loss -v nope", "unknown variant 'nope'"),
        ("-w sync_loss -v fixed,,", "separated by commas"),
        ("-w sync_loss -b 0", "at least 1"),
        ("-w sync_loss -b 8,eight", "whole number"),
        ("-w sync_loss -b 8,8", "listed twice"),
        ("-w sync_loss --repeats 0", "at least 1"),
        ("-w sync_loss --seconds abc", "number of seconds"),
        ("-w sync_loss --device gpu", "auto, cpu, cuda or cuda:N"),
        ("--preset nope", "invalid choice"),
        ("--preset syncs -v fixed", "does not apply with --preset"),
        ("--preset syncs -w encdec", "not allowed with"),
        ("", "one of the arguments"),
        ("-w encdec -v pipelined --device cpu", "nothing to measure"),
        ("-w sync_loss FILE", "is a file"),
        ("-w sync_loss -v fixed,fixed+nope", "unknown knob 'nope'"),
        ("-w sync_loss -v fixed+amp=fp8", "knob amp takes one of: off, bf16; got 'fp8'"),
        ("-w sync_loss -v fixed+", "expected VARIANT+KNOB[=VALUE]"),
        ("-w sync_loss -v fixed+amp=bf16+amp=off", "sets knob amp twice"),
        ("-w sync_loss -v nope+amp=bf16", "unknown variant 'nope'"),
        ("-w sync_loss --knob nope", "unknown knob 'nope'"),
        ("-w sync_loss --knob amp=bf16 --knob amp=off", "given twice"),
        ("-w sync_loss -v fixed --knob cuda_graph --device cpu", "nothing to measure"),
        ("--preset beyond -v fixed", "does not apply with --preset"),
        pytest.param(
            "-w input_pipeline -b 6000 --device cpu --nproc 2",
            "batch 6000 is larger than each of 2 ranks' share of the dataset (5000 samples)",
            marks=needs_two_cpus,  # on one CPU the CPU check refuses it first
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    command_line: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, out = command_line.split(), tmp_path / "out"
    if argv[-1:] == ["FILE"]:
        out.write_text("not a directory")
        argv = [*argv[:-1], "--out", str(out)]
    else:
        argv = [*argv, "--out", str(out)]
    assert run(["sweep", *argv]) == 2
    o, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert o == "" and len(lines) == 1 and lines[0].startswith("gpudash: error: "), err
    assert says in lines[0]
    assert not out.is_dir()  # nothing was started or created


def test_without_out_the_results_go_to_a_folder_named_for_the_preset_or_the_workload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # `gpudash sweep -w path/to/mine.py:workload -b 32,64`, as docs/your-model.md shows it
    for argv, folder in (
        (["-w", "sync_loss", "--device", "cpu"], "sweep-sync_loss"),
        (["--preset", "syncs"], "sweep-syncs"),
    ):
        plan = plan_from_args(build_parser().parse_args(argv), argv)
        assert plan.out_dir == Path(folder) and (tmp_path / folder).is_dir()


def test_a_written_sweep_csv_reads_back_into_the_same_tables(tmp_path: Path) -> None:
    from gpudash.sweep.readback import redraw, summaries_from_csv
    from gpudash.sweep.report import table_row

    base = Configuration("sync_loss", "sync-heavy", "sync-heavy", 4, 0)
    fixed = Configuration("sync_loss", "fixed", "fixed", 4, 1)
    fp = FamilyPlan("sync_loss", "Host-device syncs in a masked loss", (base, fixed), seconds=5.0)
    report = SweepReport(SweepPlan((fp,), SweepSettings(repeats=2), tmp_path, "gpudash sweep --preset syncs"))
    results = [
        repeat_result(base, 1, 50.0, 0.0),
        repeat_result(fixed, 1, 75.0, 10.0),
        repeat_result(base, 2, 50.0, 20.0),
        repeat_result(fixed, 2, 75.0, 30.0),
    ]
    for r in results:
        report.add_result(r)
    report.add_family(fp, results, [])
    report.finish("done", ExitCode.OK)
    ((_, written),) = report.summaries
    ((_, read),) = summaries_from_csv(tmp_path / "sweep.csv")

    def carried(row: str) -> tuple[list[str], list[float]]:  # steps/s with its interval; the others' means
        cells = [c.strip() for c in row.strip("|").split("|")]  # (SM % and MFU %: none in these results)
        texts = [cells[0], cells[1], cells[5], cells[6], cells[8], cells[9]]
        return texts, [float(cells[i].split(" ")[0]) for i in (2, 3, 4, 7)]

    for read_back, wrote in zip(read, written, strict=True):
        (r_text, r_means), (w_text, w_means) = carried(table_row(read_back)), carried(table_row(wrote))
        assert r_text == w_text and r_means == pytest.approx(w_means, rel=0.01)
    (tmp_path / "sweep.png").unlink()
    assert [p.name for p in redraw(tmp_path)] == ["sweep.png", "sweep.svg"] and (tmp_path / "sweep.png").exists()


def test_an_old_sweep_csv_without_the_knobs_column_still_reads(tmp_path: Path) -> None:
    from gpudash.report.load import load_run
    from gpudash.sweep.readback import summaries_from_csv

    base = Configuration("sync_loss", "sync-heavy", "sync-heavy", 4, 0)
    fixed = Configuration("sync_loss", "fixed", "fixed", 4, 1)
    fp = FamilyPlan("sync_loss", "Host-device syncs in a masked loss", (base, fixed), seconds=5.0)
    report = SweepReport(SweepPlan((fp,), SweepSettings(repeats=1), tmp_path, "gpudash sweep --preset syncs"))
    results = [repeat_result(base, 1, 50.0, 0.0), repeat_result(fixed, 1, 75.0, 10.0)]
    for r in results:
        report.add_result(r)
    report.add_family(fp, results, [])
    report.finish("done", ExitCode.OK)
    path = tmp_path / "sweep.csv"
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    assert table[0][-6:] == ["knobs", "noise", "sm_active_pct", "tensor_active_pct", "dram_active_pct", "mfu_pct"]
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(line[:-4] for line in table)  # as written before GPM and MFU
    ((_, read),) = summaries_from_csv(path)
    assert [(s.config.variant, s.config.knobs) for s in read] == [("sync-heavy", "none"), ("fixed", "none")]
    assert read[1].stats["mfu_pct"] is None and read[1].comparison is not None
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(line[:-6] for line in table)  # as written before knobs
    ((_, read),) = summaries_from_csv(path)
    assert [(s.config.variant, s.config.knobs) for s in read] == [("sync-heavy", "none"), ("fixed", "none")]
    assert read[1].comparison is not None and read[1].comparison.ratio == pytest.approx(1.5, rel=0.01)
    assert [c.key for c in load_run(path).configs] == [
        ("sync_loss", "sync-heavy", 4, "none"),
        ("sync_loss", "fixed", 4, "none"),
    ]


def test_a_sweep_and_a_tune_hand_their_peak_to_every_configuration_and_refuse_a_bad_one(tmp_path: Path) -> None:
    from gpudash.cli.main import main
    from gpudash.sweep.plan import run_config
    from gpudash.tune import plan as tune_plan

    args = build_parser().parse_args(
        ["-w", "sync_loss", "--device", "cpu", "--peak-tflops", "2.5", "--out", str(tmp_path)]
    )
    plan = plan_from_args(args, [])
    assert {run_config(c, plan.settings).peak_tflops for f in plan.families for c in f.configurations} == {2.5}
    argv = ["-w", "sync_loss", "--device", "cpu", "--peak-tflops", "7", "--out", str(tmp_path / "t")]
    tuned = tune_plan.plan_from_args(tune_plan.build_parser().parse_args(argv), argv)
    assert tuned.settings.sweep_settings().peak_tflops == 7.0
    for command in ("sweep", "tune"):
        with pytest.raises(SystemExit) as stop:
            main([command, "-w", "sync_loss", "--peak-tflops", "0", "--out", str(tmp_path / "x")])
        assert stop.value.code == 2
