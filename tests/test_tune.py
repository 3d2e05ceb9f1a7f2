"""``gpudash tune``: the race's decisions on synthetic figures, the candidates and their order, and
bad input (the loss check and whole races on the CPU: tests/test_tune_runs.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import pytest

from gpudash.recording.interrupt import Interrupted
from gpudash.stats.comparison import Estimate
from gpudash.tune import race
from gpudash.tune.candidates import Candidate, CandidateMaker
from gpudash.tune.driver import TuneProgress, diagnosis_steps
from gpudash.tune.plan import build_parser, plan_from_args
from gpudash.tune.report import TuneReport
from gpudash.tune.run import TuneRun
from workloads.knobs import Knobs, label_of
from workloads.registry import family

ROOT = Path(__file__).resolve().parents[1]


def speed(mean: float, rel: float = 0.01, n: int = 40) -> Estimate:
    """An estimate of ``mean`` samples/s with a ±``rel`` interval over ``n`` samples (8 batch means)."""
    spread = [mean * (1 + rel * k / 4) for k in (-3, -2, -1, 0, 0, 1, 2, 3)]
    return Estimate(mean, mean * (1 - rel), mean * (1 + rel), n, tuple(spread))


# -- the race's decisions ------------------------------------------------------------------------
def test_a_candidate_clearly_below_the_leader_drops_out_and_one_within_its_noise_stays() -> None:
    cut = race.cut(
        [race.Standing("lead", speed(1000)), race.Standing("close", speed(995)), race.Standing("slow", speed(600))]
    )
    assert cut.kept == ["lead", "close"]
    assert "clearly slower than the leader: 0.6" in cut.dropped["slow"]


def test_each_rung_keeps_a_third_and_says_the_rank_of_the_rest() -> None:
    standings = [race.Standing(f"c{i}", speed(1000 - i, rel=0.05)) for i in range(9)]  # all within noise
    cut = race.cut(standings)
    assert cut.kept == ["c0", "c1", "c2"]
    assert cut.dropped["c8"].startswith("rank 9 of 9") and "(halving)" in cut.dropped["c8"]


def test_a_failed_candidate_drops_out_with_its_error_and_never_leads() -> None:
    cut = race.cut([race.Standing("graph", None, "cannot capture"), race.Standing("plain", speed(10))])
    assert cut.kept == ["plain"] and cut.dropped == {"graph": "failed: cannot capture"}
    assert race.leader([race.Standing("graph", None, "x")]) is None


def test_the_variant_stage_judges_each_batch_size_against_its_own_leader() -> None:
    standings = [
        race.Standing("serial8", speed(1800)),
        race.Standing("piped8", speed(1790)),
        race.Standing("serial32", speed(3700)),
        race.Standing("piped32", speed(4300)),
    ]
    batch: dict[object, int] = {"serial8": 8, "piped8": 8, "serial32": 32, "piped32": 32}
    cut = race.variant_cut(standings, batch)
    assert set(cut.kept) == {"serial8", "piped8", "piped32"}  # batch 8 is not judged against batch 32
    assert "clearly slower" in cut.dropped["serial32"]


def test_the_race_is_settled_when_the_rest_are_within_the_leaders_noise() -> None:
    assert race.settled([race.Standing("a", speed(1000)), race.Standing("b", speed(999))])
    assert not race.settled([race.Standing("a", speed(1000)), race.Standing("b", speed(900))])
    assert not race.settled([race.Standing("a", speed(1000)), race.Standing("b", Estimate(990, None, None, 3))])


# -- the candidates ------------------------------------------------------------------------------
POOL = (
    ("amp", "bf16"),
    ("channels_last", "on"),
    ("cudnn_benchmark", "on"),
    ("cuda_graph", "on"),
    ("compile", "default"),
)


def test_a_refused_knob_is_listed_once_and_the_runner_up_gets_the_stacks_the_leader_refused() -> None:
    maker = CandidateMaker(family("sync_loss"), "cuda", POOL)
    heavy, fixed = maker.variants(["sync-heavy", "fixed"], [32])
    second = maker.knobs([heavy], None)
    assert not any("cuda_graph" in c.label for c in second)  # sync-heavy syncs: no capture
    assert sum("sync-heavy" in r and "cuda_graph" in r for r in maker.refusals) == 1
    assert all("sync-free" in r for r in maker.refusals)
    exact = next(c for c in second if c.label == "sync-heavy+channels_last+cudnn_benchmark")
    follow = [c.label for c in maker.follow(fixed, heavy, [exact])]
    # the stack that led on sync-heavy, and the graph stacks nothing was measured against
    assert follow == [
        "fixed+channels_last+cudnn_benchmark",
        "fixed+channels_last+cudnn_benchmark+cuda_graph",
        "fixed+amp=bf16+channels_last+cudnn_benchmark+cuda_graph",
    ]


def test_each_knob_alone_goes_on_the_leader_and_compile_only_on_the_fast_stack() -> None:
    maker = CandidateMaker(family("encdec"), "cuda", POOL)
    leader, _ = maker.variants(["pipelined", "serial"], [8])  # the leader first
    second = maker.knobs([leader], None)
    singles = {c.label for c in second if c.stage == "single"}
    assert singles == {
        "pipelined+amp=bf16",
        "pipelined+channels_last",
        "pipelined+cudnn_benchmark",
        "pipelined+cuda_graph",
    }
    assert not any("compile" in c.label for c in second) and all(c.label.startswith("pipelined") for c in second)
    base, compiled = maker.compile_base(leader), maker.compiled(leader)
    assert base is not None and base.label == "pipelined+amp=bf16+channels_last+cudnn_benchmark"
    assert compiled is not None and compiled.label == base.label + "+compile=default"


def test_a_host_bound_diagnosis_tries_cuda_graphs_first() -> None:
    maker = CandidateMaker(family("encdec"), "cuda", POOL)
    survivors = maker.variants(["serial"], [8])
    second = maker.knobs(survivors, "host/launch-bound")
    assert "cuda_graph" in second[0].label
    assert [c.label for c in maker.knobs(survivors, None)][0] == "serial+amp=bf16"


def test_a_runner_up_follows_the_stacks_that_led_and_at_most_two() -> None:
    stacks = [
        race.Standing("fast+graph", speed(11000)),
        race.Standing("exact+graph", speed(10950)),  # within the leader's noise
        race.Standing("graph", speed(10900)),  # within it too, but third
        race.Standing("exact", speed(3500)),  # clearly slower
    ]
    assert race.followed_stacks(stacks) == ["fast+graph", "exact+graph"]
    assert race.followed_stacks([stacks[0], race.Standing("exact", speed(9000))]) == ["fast+graph"]


def test_compile_is_raced_only_on_a_stack_that_could_reach_the_leader_with_it() -> None:
    lead = race.Standing("graph", speed(8000))
    assert race.compile_out_of_reach(lead, race.Standing("fast", speed(6000))) is None  # needs 1.33x
    why = race.compile_out_of_reach(lead, race.Standing("fast", speed(5000)))  # needs 1.6x
    assert why is not None and "0.62x the leader's" in why and "1.60x faster" in why
    assert race.compile_out_of_reach(lead, race.Standing("fast", None, "failed")) is None  # no figure: race it


class ScriptedRace(TuneRun):
    """The race's order of work on given speeds (samples/s by label): ``_stage`` measures nothing,
    it notes what the race asked to measure."""

    def __init__(self, tmp_path: Path, family_name: str, speeds: Mapping[str, float], knobs: str = "") -> None:
        argv = ["-w", family_name, "--device", "cpu", "--out", str(tmp_path / "t")] + (
            ["--knobs", knobs] if knobs else []
        )
        plan = plan_from_args(build_parser().parse_args(argv), argv)
        settings = dataclasses.replace(plan.settings, device_type="cuda")
        plan = dataclasses.replace(plan, pool=POOL + (("tf32", "on"),), settings=settings)
        super().__init__(plan, TuneReport(plan), Interrupted(), TuneProgress(True, 0))
        self.speeds, self.measured = dict(speeds), list[str]()
        self.windows_for_interval: dict[str, int] = {}  # a label's windows before its estimate has an interval
        self.rel_width: dict[str, int] = {}  # a label's windows before its interval is within race.PRECISION

    def _stage(self, name: str, candidates: list[Candidate], seconds: float, number: int) -> None:
        self.measured += [c.label for c in candidates]

    def _standings(self, candidates: list[Candidate]) -> list[race.Standing]:
        out = []
        for c in candidates:
            windows = self.measured.count(c.label)
            known = speed(self.speeds[c.label]) if windows else None
            if known is not None and windows < self.rel_width.get(c.label, 0):
                known = speed(known.mean, rel=2.5 * race.PRECISION)
            if known is not None and windows < self.windows_for_interval.get(c.label, 1):
                known = Estimate(known.mean, None, None, 3)  # too few samples yet
            out.append(race.Standing(c, known))
        return out


AUGMENT_SPEEDS = {  # samples/s of augment at batch 32 on an H100 (docs/bench/h100-tune/tune-augment)
    "pipelined": 3800,
    "gpu-vectorized": 3700,
    "pipelined+amp=bf16+channels_last+cudnn_benchmark+tf32+cuda_graph": 11300,
    "pipelined+channels_last+cudnn_benchmark+cuda_graph": 9700,
    "pipelined+channels_last+cudnn_benchmark": 3500,
    "pipelined+amp=bf16+channels_last+cudnn_benchmark+tf32": 2900,
    "gpu-vectorized+amp=bf16+channels_last+cudnn_benchmark+tf32+cuda_graph": 10600,
} | {f"pipelined+{k}": 3500 for k in ("amp=bf16", "channels_last", "cudnn_benchmark", "tf32", "cuda_graph")}


def test_the_runner_up_variant_gets_the_stack_that_led_and_compile_only_within_reach(tmp_path: Path) -> None:
    run = ScriptedRace(tmp_path, "augment", AUGMENT_SPEEDS)
    leader, runner_up = (run.maker.make(v, 32, (), "variant") for v in ("pipelined", "gpu-vectorized"))
    assert leader is not None and runner_up is not None
    run._knob_stage([leader, runner_up], "GPU-bound (compute)", with_compile=True)
    followed = [m for m in run.measured if m.startswith("gpu-vectorized")]
    assert followed == ["gpu-vectorized+amp=bf16+channels_last+cudnn_benchmark+tf32+cuda_graph"]
    assert not any("compile" in m for m in run.measured)  # bf16 without graphs: 0.26x the leader
    skipped = "\n".join(run.report.refusals)
    assert "those stacks did not lead on pipelined" in skipped
    assert "compile on pipelined b32: its stack without compile ran at 0.26x" in skipped
    assert "compile on gpu-vectorized b32: its stack without compile was not tried" in skipped


@pytest.mark.parametrize(
    ("fast_stack", "knobs"),
    [(9000, ""), (2900, "amp=bf16,channels_last,cudnn_benchmark,tf32,cuda_graph,compile")],
    ids=["within-reach", "named-in-knobs"],
)
def test_compile_is_raced_where_its_stack_is_close_or_when_named(tmp_path: Path, fast_stack: int, knobs: str) -> None:
    compiled = "pipelined+amp=bf16+channels_last+cudnn_benchmark+tf32+compile=default"
    speeds = AUGMENT_SPEEDS | {"pipelined+amp=bf16+channels_last+cudnn_benchmark+tf32": fast_stack, compiled: 9500}
    run = ScriptedRace(tmp_path, "augment", speeds, knobs)
    leader = run.maker.make("pipelined", 32, (), "variant")
    assert leader is not None
    run._knob_stage([leader], "GPU-bound (compute)", with_compile=True)
    assert run.measured[-1] == compiled  # last: its warm-up is the longest
    assert not any("compile on" in r for r in run.report.refusals)


def _labels(kept: list[object]) -> list[str]:
    """The labels of a cut's kept candidates (``race`` keeps them as plain keys)."""
    return [c.label if isinstance(c, Candidate) else repr(c) for c in kept]


def test_a_slow_plain_variant_is_measured_again_before_it_could_keep_a_faster_one_out(tmp_path: Path) -> None:
    speeds = AUGMENT_SPEEDS | {"cpu": 800, "gpu": 1800, "pipelined-loop": 1900}  # gpu-vectorized: 0.97x
    run = ScriptedRace(tmp_path, "augment", speeds)
    run.windows_for_interval = {"cpu": 2}  # its first window: too few samples for an interval
    first = run.maker.variants(family("augment").variant_names, [32])
    batch_of: dict[object, int] = {c: 32 for c in first}
    run._stage("plain variants", first, 1.0, 1)
    kept = race.variant_cut(run._standings(first), batch_of).kept
    assert _labels(kept) == ["pipelined", "cpu"]  # cpu, at 0.2x, cannot be judged yet
    run._until_intervals("plain variants", first, 1.0, 1)
    assert run.measured.count("cpu") == 2 and run.measured.count("pipelined") == 1
    kept = race.variant_cut(run._standings(first), batch_of).kept
    assert _labels(kept) == ["pipelined"]


def test_a_diagnosis_lasts_about_half_a_second_of_steps() -> None:
    assert diagnosis_steps(25.0) == 12  # a slow step: not 30 of them, twice
    assert diagnosis_steps(4.0) == 10 and diagnosis_steps(400.0) == 30 and diagnosis_steps(None) == 30


@pytest.mark.parametrize("rung_measured", [True, False])
def test_the_last_round_measures_the_leader_beside_its_references(tmp_path: Path, rung_measured: bool) -> None:
    run = ScriptedRace(tmp_path, "augment", AUGMENT_SPEEDS)
    make = run.maker.make
    plain, single = make("cpu", 32, (), "variant"), make("pipelined", 32, ("channels_last",), "single")
    graph_stack = ("amp", "channels_last", "cudnn_benchmark", "tf32", "cuda_graph")
    lead, second = make("pipelined", 32, graph_stack, "stack"), make("gpu-vectorized", 32, graph_stack, "stack")
    run.speeds |= {"cpu": 800}
    finalists = [c for c in (lead, second) if c is not None]
    run.report.add_candidates([c for c in (plain, single, *finalists) if c is not None])
    run.measured += [c.label for c in run.report.candidates]
    run._confirm(finalists, 2.0, rung_measured)
    expected = {lead.label, plain.label, single.label} if lead and plain and single else set()
    # after a rung, the other finalist was just measured beside the leader: not again
    again = {second.label} if second is not None and not rung_measured else set()
    assert set(run.measured[len(run.report.candidates) :]) == expected | again


def test_labels_are_the_entries_sweep_takes() -> None:
    assert label_of("fixed", Knobs({"amp": "bf16", "cuda_graph": "on"})) == "fixed+amp=bf16+cuda_graph"


# -- bad input -----------------------------------------------------------------------------------
def _tune_refused(*args: str) -> int:
    """``gpudash tune ARGS`` in this process, refused before any workload starts: its exit status
    (argparse's refusals exit)."""
    from gpudash.cli.main import main

    try:
        return int(main(["tune", *args]))
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ("-w sync_loss --knobs amp=bf16,warp_speed", "unknown knob 'warp_speed'"),
        ("-w sync_loss --knobs ddp_torch_defaults", "tune runs one process"),
        ("-w sync_loss --knobs amp=off", "name a value"),
        ("-w sync_loss --max-minutes 0.05", "too short for even one round"),
        ("-w nope", "unknown workload 'nope'"),
        ("-w sync_loss -b 0", "batch"),
        ("-w sync_loss --current warp+tf32", "--current warp+tf32: unknown variant 'warp'"),
        ("-w sync_loss --current fixed+cuda_graph", "--current fixed+cuda_graph: knob cuda_graph needs CUDA"),
        ("-w sync_loss --current fixed+tf32+tf32=never", "sets knob tf32 twice"),
        ("-w sync_loss --workers -1", "--workers"),
    ],
)
def test_bad_tune_input_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: str, said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = _tune_refused(*args.split(), "--device", "cpu"), capsys.readouterr().err
    assert code == 2, err
    assert said in err and len(err.strip().splitlines()) <= 2, err
    assert not any(tmp_path.iterdir())  # nothing written


def test_knobs_of_which_none_runs_here_leave_nothing_to_tune(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = _tune_refused("-w", "sync_loss", "--knobs", "cuda_graph,cudnn_benchmark", "--device", "cpu")
    err = capsys.readouterr().err
    assert code == 2, err
    assert "nothing to tune: knob cuda_graph: it needs CUDA (on cpu)" in err and "--device cuda" in err
    code = _tune_refused("-w", "sync_loss", "--knobs", "amp=bf16", "--exact", "--device", "cpu")
    err = capsys.readouterr().err
    assert code == 2 and "it changes the number format (--exact)" in err, err


def test_a_winner_with_a_wide_interval_is_measured_again_beside_its_closest_rival(tmp_path: Path) -> None:
    run = ScriptedRace(tmp_path, "augment", AUGMENT_SPEEDS)
    make = run.maker.make
    graph_stack = ("amp", "channels_last", "cudnn_benchmark", "tf32", "cuda_graph")
    lead, rival = make("pipelined", 32, graph_stack, "stack"), make("gpu-vectorized", 32, graph_stack, "stack")
    third = make("pipelined", 32, ("channels_last", "cudnn_benchmark", "cuda_graph"), "stack")
    assert lead is not None and rival is not None and third is not None
    run.report.add_candidates([lead, rival, third])
    run.measured += [lead.label, lead.label, rival.label, rival.label, third.label, third.label]
    run.rel_width = {lead.label: 3}  # two windows: an interval, but wider than race.PRECISION
    run._sharpen([lead, rival, third], 2.0, 9)
    again = run.measured[6:]
    assert sorted(again) == sorted([lead.label, rival.label])  # one more round narrowed it: stop
    run.rel_width = {lead.label: 99}  # never narrows: at most race.EXTRA_ROUNDS more rounds
    run._sharpen([lead, rival, third], 2.0, 9)
    assert len(run.measured[8:]) == 2 * race.EXTRA_ROUNDS and third.label not in run.measured[6:]


def test_a_tune_at_an_image_size_races_and_reproduces_at_that_size(tmp_path: Path) -> None:
    """``gpudash tune --image-size 32`` (the dashboard's ``u`` passes the run's): every candidate's
    session builds its workload at that size, and the winner's command runs it there."""
    from gpudash.sweep.plan import Configuration, run_config
    from gpudash.tune.tally import reproduce

    argv = ["-w", "sync_loss", "-b", "8", "--device", "cpu", "--image-size", "32", "--out", str(tmp_path / "t")]
    plan = plan_from_args(build_parser().parse_args(argv), argv)
    variant = plan.variants[0]
    config = Configuration("sync_loss", variant, variant, 8, 0)
    assert run_config(config, plan.settings.sweep_settings()).image_size == 32
    candidate = Candidate(config, "variant")
    assert reproduce(plan, candidate).endswith("--image-size 32")
    default = plan_from_args(build_parser().parse_args(argv[:-4]), argv[:-4])
    assert run_config(config, default.settings.sweep_settings()).image_size is None  # the family's own


def test_what_runs_now_is_raced_beside_the_plain_variants_and_in_the_final_round(tmp_path: Path) -> None:
    """``--current`` (the dashboard's u names what is on its screen): that configuration is measured
    in the first stage though no stage would make it, and again in the final round beside the
    winner, which is weighed against it; the winner's command keeps the run's workers."""
    from gpudash.tune.tally import reproduce

    speeds = AUGMENT_SPEEDS | {"cpu": 900, "cpu+channels_last+tf32=never": 1000}
    run = ScriptedRace(tmp_path, "augment", speeds)
    settings = dataclasses.replace(run.tune.settings, workers=3)
    run.tune = run.report.plan = dataclasses.replace(
        run.tune, current=("cpu", "channels_last=on,tf32=never"), settings=settings
    )
    first = [c for c in (run.maker.make(v, 32, (), "variant") for v in ("pipelined", "gpu-vectorized")) if c]
    now = run._current(first)
    assert [c.label for c in now] == ["cpu+channels_last+tf32=never"] and run.measured == [now[0].label]
    assert now[0].stage == "current" and now[0].config.knobs == "channels_last=on,tf32=never"
    assert run.report.current == now[0] and now[0] in run.report.candidates
    run.measured += [c.label for c in first]
    run._confirm([*first, *now], 2.0, rung_measured=True)
    final = run.measured[3:]
    assert final.count("pipelined") == 1 and now[0].label in final, final  # the winner and what runs now
    assert [name for _, name, _ in run.report.references()][0] == "what runs now"
    assert reproduce(run.tune, first[0]).endswith("--workers 3")
