"""Issue 63 on the CPU (gloo): a torchrun job under gpudash is untouched — its own output and its
trained weights are those of its bare run, in ``record``, ``--trace-every`` and ``diagnose`` — it
ends cleanly when gpudash ends it, and its ranks read right: the rank with a slower input is the
straggler by its own work, an even job has none, and an FSDP2 job records its ranks."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import printed
from tests.helpers import once_per_session
from tests.test_job import JOBS, PLAIN, gpudash

RANKS_JOB = str(JOBS / "ddp_ranks.py")
# --standalone: a rendezvous on a free port of its own (torchrun's default, port 29500, is one port for
# every job: two jobs at once — the other xdist worker's, a session fixture's — join each other's store)
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node"]
TIMEOUT_S = 240.0

pytestmark = pytest.mark.slow


def torchrun(ranks: int, *job_args: str) -> list[str]:
    return [*TORCHRUN, str(ranks), RANKS_JOB, *job_args]


def job_lines(output: str, numbers: bool = True) -> list[str]:
    """The job's own lines (gpudash's left out), sorted (ranks print in any order), with what
    changes from run to run masked: rates, torchrun's log prefix (time, pid); every number too
    where not ``numbers``."""
    lines = []
    for whole in output.splitlines():
        for line in re.split(r"(?<=.)(?=JOB )", whole):  # two ranks' lines written at once, split
            lines.extend(_masked(line, numbers))
    return sorted(lines)


def _masked(line: str, numbers: bool) -> list[str]:
    """A job's line masked (none for gpudash's own, or an empty one)."""
    if line.startswith("gpudash:") or not line.strip():
        return []
    line = re.sub(r"^[WIE]\d{4} [\d:.]+ \d+ ", "", line)
    line = re.sub(r"steps_per_s=[\d.]+", "steps_per_s=X", line)
    return [line if numbers else re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", line)]


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """The job's bare run (once for every xdist worker: its four readers may be spread over two)."""

    def run() -> subprocess.CompletedProcess[str]:
        for _ in range(3):  # torch's own exit can abort a bare gloo run on a loaded machine (pytorch/pytorch#190489)
            done = subprocess.run(torchrun(2, "--steps", "60"), capture_output=True, text=True, timeout=TIMEOUT_S)
            if done.returncode == 0:
                break
        assert done.returncode == 0, done.stderr
        return done

    return once_per_session(tmp_path_factory, "test_torchrun_ranks-bare", run)


@pytest.mark.parametrize("mode", [[], ["--trace-every", "1"]], ids=["record", "trace-every"])
def test_the_jobs_output_and_weights_under_record_are_its_bare_runs(
    bare: subprocess.CompletedProcess[str], mode: list[str], tmp_path: Path
) -> None:
    done = gpudash("record", str(tmp_path / "run.csv"), *mode, "--", *torchrun(2, "--steps", "60"), timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert job_lines(done.stdout) == job_lines(bare.stdout)  # the weights' sums to the last bit among them
    assert job_lines(done.stderr) == job_lines(bare.stderr)  # no sync warning, no profiler line or warning
    assert any(line.startswith("JOB weights rank=1 sum=") for line in job_lines(done.stdout))  # (two ranks' lines
    # written at once can share a line of the output: job_lines splits them)


def test_diagnose_ends_every_rank_after_the_same_step_without_a_traceback(
    bare: subprocess.CompletedProcess[str], tmp_path: Path
) -> None:
    job = torchrun(2, "--steps", "100000", "--item-ms", "0.2")
    done = gpudash("diagnose", "--warmup", "1", "--", *job, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    assert "JOB end rank=0" in out and "JOB end rank=1" in out  # the job's own finally blocks ran
    for noise in ("Traceback", "KeyboardInterrupt", "SignalException", "ChildFailedError"):
        assert noise not in out
    assert "straggler" in done.stdout  # the verdict reads the ranks too
    # issue 74: the same job on one rank, run after the verdict: what communication and waiting cost at most
    checked = [line for line in done.stdout.splitlines() if "checked: the same job on 1 rank: " in line]
    assert len(checked) == 1 and " on 2 (1 rank " in checked[0], done.stdout
    assert "communication and waiting take at most" in checked[0]
    # the job's lines (its stdout too: on stderr, the verdict alone on stdout) are lines its bare run writes
    allowed = set(job_lines(bare.stdout + "\n" + bare.stderr, numbers=False))
    assert set(job_lines(done.stderr, numbers=False)) <= allowed, done.stderr[-3000:]


@pytest.mark.parametrize(("ranks", "slow"), [(2, 0), (3, 1), (2, 1)], ids=["first of 2", "middle of 3", "last of 2"])
def test_diagnose_names_the_rank_the_world_waits_for_in_its_head_with_that_ranks_own_verdict(
    ranks: int, slow: int
) -> None:
    """Issue 89 on the CPU (gloo): one rank's Dataset takes 2 ms more a sample; the others wait for
    it in DDP's collectives. ``diagnose``'s head names it with its own work against the others',
    then gives that rank's own verdict — its input, read from its own steps and window — whose
    remedies are capped at the others' pace. (It read rank 0's wait, or rank 0's host time, as the job's.)"""
    job = torchrun(ranks, "--steps", "100000", "--slow-rank", str(slow), "--item-ms", "2")
    done = gpudash("diagnose", "--json", "--warmup", "1", "--no-check", "--", *job, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    waiting = verdict["waiting_for"]
    assert waiting["rank"] == verdict["evidence_rank"] == verdict["straggler_rank"] == slow, verdict
    assert verdict["ranks"] == ranks and waiting["own_ms"] > waiting["others_own_ms"] > 0, waiting
    assert verdict["bound"] == "input-bound", verdict  # the rank's own step: its slower input
    assert verdict["evidence"]["straggler_wait_ms"] == 0  # its own evidence: it waits for no one
    assert all(r["up_to"] <= waiting["up_to"] + 1e-3 for r in verdict["remedies"]), verdict["remedies"]


def test_record_steps_ends_every_rank_after_the_same_step_before_the_jobs_first_rate(tmp_path: Path) -> None:
    """``record --steps 30`` of a 2-rank job at a few hundred steps a second: no rate yet when it
    ends, so the step every rank ends after is a second of its median step ahead (at 3 steps
    ahead, its ranks heard the request past that step, each ended where it was, and rank 1 died in
    a collective rank 0 had left: "Connection closed by peer")."""
    job = torchrun(2, "--steps", "100000")
    done = gpudash("record", str(tmp_path / "r.csv"), "--steps", "30", "--", *job)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Connection closed by peer" not in done.stderr
    out = done.stdout + done.stderr
    assert "JOB end rank=0" in out and "JOB end rank=1" in out  # each rank's own finally ran


def _straggler_run(tmp_path: Path, *job_args: str, ranks: int = 3) -> tuple[str, list[dict[str, str]]]:
    path = tmp_path / "run.csv"
    done = gpudash("record", str(path), "--", *torchrun(ranks, *job_args), timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("rank")]
    return done.stderr, rows


@pytest.mark.parametrize(("ranks", "slow"), [(2, 0), (3, 1), (4, 3)])
def test_the_rank_whose_input_is_slower_is_the_straggler(tmp_path: Path, ranks: int, slow: int) -> None:
    """The first rank of 2, the middle one of 3 and the last of 4: the lead rank (0) too, whose
    lateness the others wait for at DDP's broadcast of its buffers as well as in the gradients'
    all-reduce. (Each world size once, each place once: the first of 4 and the last of 3 tell
    nothing these do not, and cost a torchrun job each.)"""
    stderr, rows = _straggler_run(tmp_path, "--steps", "150", "--slow-rank", str(slow), ranks=ranks)
    named = printed.stragglers(stderr)
    assert named and set(named) == {slow}, stderr
    assert "its input waits" in stderr
    settings = json.loads((tmp_path / "run.json").read_text())["started"]["settings"]
    assert settings["ddp_bucket_cap_mb"] == "25" and "ddp_no_sync" not in settings  # every forward syncs
    assert {r["rank"] for r in rows} == {str(r) for r in range(ranks)}


def test_an_even_job_has_no_straggler(tmp_path: Path) -> None:
    stderr, _ = _straggler_run(tmp_path, "--steps", "300", "--item-ms", "1", "--slow-rank", "-1")
    assert printed.stragglers(stderr) == [], stderr
    assert printed.no_straggler(stderr), stderr


def test_an_fsdp2_job_over_gloo_records_its_ranks_and_its_straggler(tmp_path: Path) -> None:
    """... and its activations are what its MLP saves for backward (batch 8: its input and two ReLUs'
    outputs of 256 floats, its output and target of 1), as without FSDP: the weights FSDP2 gathers
    for the forward pass are parameters, not activations, nor frozen ones."""
    # 5 ms more a sample on rank 1 (40 ms a step): named clearly also where a loaded machine widens the
    # ranks' intervals (2 ms left it "in the noise" beside two spinners, 21% apart)
    job = ("--steps", "100", "--fsdp", "--slow-rank", "1", "--item-ms", "5")
    stderr, rows = _straggler_run(tmp_path, *job, ranks=2)
    assert set(printed.stragglers(stderr)) == {1}, stderr
    assert {r["rank"] for r in rows} == {"0", "1"}
    memory = json.loads((tmp_path / "run.json").read_text())["memory"]
    assert memory["activations_bytes"] == 8 * (3 * 256 + 2) * 4, memory
    assert "frozen_bytes" not in memory, memory  # its shards are the optimizer's: none frozen


PLAIN_JOB = [sys.executable, PLAIN, "--steps", "600", "--workers", "0", "--print-every", "100", "--warn-each-step"]
Windowed = tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]  # bare, under gpudash


@pytest.fixture(scope="module")
def windowed(tmp_path_factory: pytest.TempPathFactory) -> Windowed:
    """A plain loop recorded with profiler windows asked for every 0.1 s (20 steps each), read by
    the tests of what the windows print and of how often they come: the job's bare run (run beside
    the recording: most of a step is its sleep) and gpudash's run."""

    def record() -> Windowed:
        out = tmp_path_factory.mktemp("windowed") / "run.csv"
        bare = subprocess.Popen(PLAIN_JOB, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            args = ["--trace-every", "0.1", "--trace-steps", "20"]
            done = gpudash("record", str(out), *args, "--", *PLAIN_JOB, timeout=TIMEOUT_S)
            bare_out, bare_err = bare.communicate(timeout=TIMEOUT_S)
        finally:
            bare.kill()
            bare.wait()
        assert bare.returncode == 0 and done.returncode == 0, done.stderr
        return subprocess.CompletedProcess(PLAIN_JOB, bare.returncode, bare_out, bare_err), done

    return once_per_session(tmp_path_factory, "test_torchrun_ranks-windowed", record)  # read by two workers


def test_a_profiler_window_on_the_cpu_prints_nothing_into_the_jobs_output(windowed: Windowed) -> None:
    bare, done = windowed
    assert "steps traced" in done.stderr  # a window ran (its "measured" line)
    for native in ("profiler_start", "profiler_stop", "USDT:", "gpuGetDeviceCount", "Profiler clears events"):
        assert native not in done.stderr
    assert job_lines(done.stdout, numbers=False) == job_lines(bare.stdout, numbers=False)
    # a warning Python shows once is shown once: a window does not make Python forget it was shown
    said = "UserWarning: this call has no device id"
    assert bare.stderr.count(said) == 1 and done.stderr.count(said) == 1, done.stderr[-2000:]


def test_a_job_accumulating_under_no_sync_is_read_by_its_optimizer_steps(tmp_path: Path) -> None:
    """4 micro-batches of 8 a step, one all-reduce a step: gpudash counts the job's 40 optimizer
    steps (its warm-up's and the measured ones), not 160 micro-batches, each of 2 × 4 × 8 samples, and still
    names the rank whose input is slower."""
    stderr, rows = _straggler_run(tmp_path, "--steps", "40", "--accumulate", "4", "--slow-rank", "1", ranks=2)
    (counted,) = [s for s in printed.summaries(stderr) if s.label.endswith(" bs64")]  # a pass of 2 × 4 × 8
    assert counted.steps is not None and counted.warmup_steps is not None, stderr  # (too few for an interval or not)
    assert counted.steps + counted.warmup_steps == 40, stderr
    assert set(printed.stragglers(stderr)) == {1}, stderr
    assert {r["rank"] for r in rows} == {"0", "1"}
    # its DDP's settings say it accumulates already: no remedy tells it to start
    assert json.loads((tmp_path / "run.json").read_text())["started"]["settings"]["ddp_no_sync"] == "True"


def test_periodic_windows_wait_for_the_last_ones_cost_before_the_next(windowed: Windowed) -> None:
    """Windows asked for every 0.1 s: once one has run, the next comes no sooner than keeps their
    cost at 5% of the job's time — also for the requests made while a window was running or being
    read (on 2 H100s three windows came 5 s apart, though one every 43 s kept to 5%)."""
    _, done = windowed
    costs = [
        (e.time_s, re.search(rf"the window cost the job ({printed.NUMBER}) s", e.text))
        for e in printed.event_lines(done.stderr, "measured")
        if " steps traced" in e.text
    ]
    windows = [(read_at, printed.number(cost[1])) for read_at, cost in costs if cost is not None]
    assert len(windows) >= 2, done.stderr
    for (read_at, cost_s), (next_read_at, _) in zip(windows, windows[1:], strict=False):
        assert next_read_at - read_at >= cost_s / 0.05 - 0.1, done.stderr


def test_tune_races_a_torchrun_job_and_leaves_its_output_its_own(
    bare: subprocess.CompletedProcess[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every candidate of a tune race on 2 gloo ranks — those dropped early too — ends at a step
    with exit 0, and writes nothing on its stderr that the bare job does not (numbers aside)."""
    from gpudash.tune import job_race, worker_cpu

    monkeypatch.setattr(worker_cpu, "GUARD_WORKERS", 2)
    monkeypatch.setattr(job_race, "GUARD_WORKERS", 2)
    monkeypatch.setattr(job_race.os, "sched_getaffinity", lambda pid: set(range(2)))
    out = tmp_path / "t"
    job = ["--", *torchrun(2, "--steps", "1000000", "--item-ms", "1")]
    code = job_race.main(["--seconds", "5", "--max-minutes", "4", "--json", "--out", str(out), *job])
    said = capsys.readouterr()
    assert code == 0, said.err[-3000:]
    errs = sorted((out / "runs").glob("*.err"))
    assert len(errs) >= 2, said.err[-3000:]
    for err in errs:
        text = err.read_text()
        assert set(job_lines(text, numbers=False)) <= set(job_lines(bare.stderr, numbers=False)), (err, text[-2000:])
