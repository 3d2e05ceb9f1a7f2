"""The user's own job, unmodified (``gpudash [record PATH|diagnose] -- CMD``), on the CPU: real
training scripts (``tests/data/jobs/``) run through the real command — a plain loop with a
DataLoader and workers, two optimizers in one iteration, gradient accumulation, an exit code of
its own, a Hugging Face ``Trainer`` (``torchrun`` on gloo is tests/test_job_flops.py's: one
recording for its ranks and their FLOPs; Lightning's ``Trainer.fit``, its steps its global steps,
tests/test_job_phases.py's, with its validation loop) — and what a user
notices: the steps and samples recorded, the job's output and exit status passed through, Ctrl-C
and a killed gpudash, bad input, the recordings read by report and replay (shared by the tests)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import printed
from tests.helpers import once_per_session

JOBS = Path(__file__).parent / "data" / "jobs"
PLAIN = str(JOBS / "plain_loop.py")
TIMEOUT_S = 180.0


def gpudash(
    *args: str, timeout: float = TIMEOUT_S, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``gpudash ARGS`` as a user runs it; its stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "gpudash", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def samples(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return [row for row in csv.DictReader(f) if row["row_kind"] == "sample"]


def events(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return [row for row in csv.DictReader(f) if row["row_kind"] == "event"]


def job_line(stdout: str) -> dict[str, str]:
    """The job's own last line ("JOB steps=40 ...") as a dict."""
    (line,) = [x for x in stdout.splitlines() if x.startswith("JOB ")]
    return dict(part.split("=", 1) for part in line.split()[1:])


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--"], 2, "nothing after --"),
        (["record", "x.csv", "--", "no-such-command-here"], 127, "no-such-command-here: command not found"),
        (["record", "x.csv", "--", "./no/such/file.py"], 127, "no such file"),
        (
            ["record", "x.csv", "--", sys.executable, "missng.py", "--lr", "3"],
            127,
            "missng.py: no such file (the script of",
        ),
        (
            ["diagnose", "--", sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "tran.py"],
            127,
            "tran.py: no such",
        ),
        (["-w", "encdec", "--", "python", "train.py"], 2, "-w/--workload does not apply to a job"),
        (["-b", "8", "--", "python", "train.py"], 2, "does not apply to a job"),
        (["list", "--", "python", "train.py"], 2, "takes no job"),
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(tmp_path: Path, args: list[str], code: int, says: str) -> None:
    os.chdir(tmp_path)
    done = gpudash(*args)
    assert done.returncode == code
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpudash: error:") and says in lines[0]
    assert not (tmp_path / "x.csv").exists()


def test_a_job_whose_python_has_no_torch_exits_with_its_own_code_and_records_nothing(tmp_path: Path) -> None:
    script = tmp_path / "no_torch.py"
    script.write_text("import sys\nsys.path = [p for p in sys.path if 'packages' not in p]\nimport torch\n")
    done = gpudash("record", str(tmp_path / "r.csv"), "--", sys.executable, str(script))
    assert done.returncode == 1
    assert "ModuleNotFoundError" in done.stderr  # the job's own traceback, passed through
    assert (
        done.stderr.strip().splitlines()[-1]
        == "gpudash: the job exited with code 1 before its first step: nothing recorded"
    )
    assert not (tmp_path / "r.csv").exists()


# -- what a step is ---------------------------------------------------------------------------------
TWO_OPTIMIZERS = [sys.executable, PLAIN, "--steps", "40", "--two-optimizers", "--accumulate", "2", "--exit-code", "7"]


@pytest.fixture(scope="module")
def two_optimizers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``TWO_OPTIMIZERS`` recorded once (its exit code its own: 7): its CSV and gpudash's run."""

    def record() -> tuple[Path, subprocess.CompletedProcess[str]]:
        out = tmp_path_factory.mktemp("two-optimizers") / "r.csv"
        return out, gpudash("record", str(out), "-q", "--", *TWO_OPTIMIZERS)

    return once_per_session(tmp_path_factory, "test_job-two-optimizers", record)  # its tests may run in two workers


@pytest.mark.slow
def test_a_plain_loop_with_workers_two_optimizers_and_accumulation_is_counted_as_the_job_counts(
    two_optimizers: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """Two optimizers step in each iteration and two micro-batches make a step: 40 steps of 32
    samples, as the job says; its output passes through and its exit code comes back."""
    out, done = two_optimizers
    job = TWO_OPTIMIZERS
    assert done.returncode == 7
    own = job_line(done.stdout)
    rows = samples(out)
    assert int(own["steps"]) == 40 == int(rows[-1]["steps"])
    assert {r["batch_size"] for r in rows} == {"32"} and int(rows[-1]["samples"]) == 40 * 32
    assert {r["workload"] for r in rows} == {"job:plain_loop.py"}
    (crashed,) = [e for e in events(out) if e["event_kind"] == "crashed"]
    assert crashed["event_message"] == "the job exited with code 7"
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["config"]["job"] == job and meta["exit_code"] == 7
    last = printed.done_line(done.stderr.strip().splitlines()[-1])  # what was kept, not "workload failed"
    assert last is not None and (last.status, last.samples, last.path) == (
        "the job exited with code 7",
        len(rows),
        str(out),
    )


@pytest.mark.slow
def test_accumulated_micro_batches_are_one_steps_flops_and_without_a_peak_mfu_is_blank(
    two_optimizers: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    from tests.test_job_flops import flops_event, mlp_flops  # their subject; this module's recording

    out, _ = two_optimizers
    flops = mlp_flops(16, 32, micro_batches=2)  # (its optimizers' updates: no FLOPs of a formula)
    assert flops_event(out)["event_message"] == (
        "model FLOPs: 71.7 kFLOP a step (fp32 100%); MFU blank: no GPU, so no peak to compare with: "
        "give one with --peak-tflops"
    )
    rows = samples(out)
    assert rows and all(float(r["flops_per_step"]) == flops and r["tflops"] and not r["mfu_pct"] for r in rows)


@pytest.mark.slow
def test_a_failing_hook_turns_the_hooks_off_with_one_line_and_the_job_goes_on(tmp_path: Path) -> None:
    done = gpudash(
        "record", str(tmp_path / "r.csv"), "-q", "--", sys.executable, PLAIN, "--odd-batches", "--workers", "0"
    )
    assert done.returncode == 0
    assert job_line(done.stdout)["steps"] == "40"
    off = [x for x in done.stderr.splitlines() if "hooks are off" in x]
    assert off == ["gpudash: the job's hooks are off: reading a batch: RuntimeError: no attributes here"]


def _recorded(factory: pytest.TempPathFactory, name: str, *args: str) -> Path:
    """``gpudash record NAME.csv -q ARGS`` (gpudash's options, ``--``, the job) in a temp folder, checked
    to exit 0, once per session (``once_per_session``: its module's tests may run in two workers): the CSV."""

    def record() -> Path:
        out = factory.mktemp(name) / f"{name}.csv"
        done = gpudash("record", str(out), "-q", *args)
        assert done.returncode == 0, done.stderr
        return out

    return once_per_session(factory, f"test_job-{name}", record)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain loop of 100,000 steps (batches of 8, its two workers) that ``--steps 150`` stops, its MFU
    over ``--peak-tflops 1``: its CSV. 150 steps of at least 20 ms outlast the report's warm-up
    however fast the machine (40 did not: 0.8 s, all of it warm-up, left report nothing to pair)."""
    job = [sys.executable, PLAIN, "--steps", "100000", "--sleep", "0.02", "--batch", "8"]
    return _recorded(tmp_path_factory, "stopped", "--steps", "150", "--peak-tflops", "1", "--", *job)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """130 steps of dict batches of 8 from one spawned worker, an evaluation pass every 10 steps and a
    new optimizer (the first one freed) after 30: its CSV."""
    job = [sys.executable, PLAIN, "--steps", "130", "--dict-batches", "--spawn-workers", "--workers", "1"]
    more = ["--batch", "8", "--eval-every", "10", "--new-optimizer-after", "30"]
    return _recorded(tmp_path_factory, "evaluated", "--", *job, *more)


@pytest.mark.slow
def test_dict_batches_count_their_input_ids_and_spawned_workers_are_not_ranks(evaluated: Path) -> None:
    rows = samples(evaluated)
    assert int(rows[-1]["steps"]) == 130 and rows[-1]["batch_size"] == "8" and rows[-1]["world_size"] == "1"


@pytest.mark.slow
def test_steps_stops_the_job_after_that_many_steps(stopped: Path) -> None:
    assert int(samples(stopped)[-1]["steps"]) == 150  # the steps the job made after the 150th are not the run's
    stops = [e["event_message"] for e in events(stopped) if e["event_kind"] == "stopped"]
    assert stops == ["the job stopped by gpudash"]


@pytest.mark.slow
def test_a_plain_loops_flops_a_step_are_its_models_and_mfu_is_over_the_peak_given(stopped: Path) -> None:
    from tests.test_job_flops import flops_event, mlp_flops  # their subject; this module's recording

    message = flops_event(stopped)["event_message"]
    assert message == "model FLOPs: 17.9 kFLOP a step (fp32 100%); MFU over 1 TFLOP/s (--peak-tflops)"
    assert (rows := samples(stopped))
    for row in rows:
        assert float(row["flops_per_step"]) == mlp_flops(8, 32)
        assert float(row["tflops"]) == pytest.approx(mlp_flops(8, 32) * float(row["steps_per_s"]) / 1e12, rel=1e-4)
        assert float(row["mfu_pct"]) == pytest.approx(100 * float(row["tflops"]) / 1.0, rel=1e-4)


@pytest.mark.slow
def test_a_hugging_face_trainer_with_accumulation_counts_its_global_steps(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    out = tmp_path / "r.csv"
    done = gpudash("record", str(out), "-q", "--", sys.executable, str(JOBS / "hf_trainer.py"), "12")
    assert done.returncode == 0, done.stderr
    rows = samples(out)
    assert job_line(done.stdout)["global_step"] == "12" == rows[-1]["steps"]
    assert rows[-1]["batch_size"] == "8"  # 4 a micro-batch, 2 micro-batches a step


# -- the job stays the user's ---------------------------------------------------------------------
def _start(tmp_path: Path, *job_args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "gpudash", "record", str(tmp_path / "r.csv"), "-q"]
    argv += ["--", sys.executable, PLAIN, "--steps", "100000", *job_args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for_samples(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not (path.exists() and len(samples(path)) >= 2):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.2)


def _job_group(gpudash_pid: int) -> int:
    import psutil

    (job,) = [p for p in psutil.Process(gpudash_pid).children() if "plain_loop.py" in " ".join(p.cmdline())]
    return job.pid


def _alive(pgid: int) -> list[int]:
    import psutil

    out = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return out


@pytest.mark.slow
def test_ctrl_c_goes_to_the_job_and_gpudash_keeps_what_it_recorded(tmp_path: Path) -> None:
    proc = _start(tmp_path, "--workers", "0", "--interrupted-code", "42", "--interrupt-takes", "8")
    _wait_for_samples(tmp_path / "r.csv", proc)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert "JOB interrupted" in out  # the job got it
    assert proc.returncode == 42  # the job's own status
    rows = samples(tmp_path / "r.csv")
    assert len(rows) >= 2 and int(rows[-1]["steps"]) > 0
    assert json.loads((tmp_path / "r.json").read_text())["rows"] > 0


@pytest.mark.slow
def test_a_killed_gpudash_takes_the_job_and_its_workers_with_it_within_5_s(tmp_path: Path) -> None:
    proc = _start(tmp_path, "--workers", "2")
    _wait_for_samples(tmp_path / "r.csv", proc)
    group = _job_group(proc.pid)
    assert len(_alive(group)) >= 3  # the job and its two DataLoader workers
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5.0
    while _alive(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(group) == []


# -- the same recordings ------------------------------------------------------------------------------
@pytest.mark.slow
def test_two_recordings_of_one_script_pair_up_in_report_and_replay(
    stopped: Path, evaluated: Path, tmp_path: Path
) -> None:
    done = gpudash("report", str(stopped), str(evaluated), "--out", str(tmp_path / "rep"), "--json")
    assert done.returncode == 0, done.stderr
    (compared,) = json.loads(done.stdout)["comparisons"]  # the same script, the same batch: paired
    assert compared["against"] == "job:plain_loop.py/--steps 100000 --sleep 0.02 --batch 8 bs8"
    assert "--eval-every 10" in compared["configuration"]
    from gpudash.recording.replay import ReplaySource, read_all

    replayed = read_all(ReplaySource(stopped))
    assert sum(type(m).__name__ == "Sample" for m in replayed) >= 2


@pytest.mark.slow
def test_evaluation_batches_are_not_the_next_steps_and_a_new_optimizer_takes_over(evaluated: Path) -> None:
    """An evaluation loader's batches between two steps are not the next step's samples; an
    optimizer that replaces the first (a second phase; the first one freed) counts from its first step."""
    last = samples(evaluated)[-1]
    assert int(last["steps"]) == 130
    assert last["batch_size"] == "8" and int(last["samples"]) == 8 * int(last["steps"])


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A script that asks ``find_spec('torch')`` before torch is imported (as transformers and accelerate
    do), then runs a plain loop of 130 steps whose new optimizer takes over after 30 while the old one
    stays referenced: its CSV."""
    job = tmp_path_factory.mktemp("probe") / "probe.py"
    job.write_text(
        "import importlib.util, sys\n"
        "assert importlib.util.find_spec('torch') is not None  # as transformers and accelerate do\n"
        "sys.argv = ['plain_loop.py', '--steps', '130', '--workers', '0', '--new-optimizer-after', '30', "
        "'--keep-old-optimizer']\n"
        f"exec(compile(open({PLAIN!r}).read(), {PLAIN!r}, 'exec'))\n"
    )
    return _recorded(tmp_path_factory, "probed", "--", sys.executable, str(job))


@pytest.mark.slow
def test_a_library_that_asks_for_torch_before_importing_it_still_gets_the_hooks(probed: Path) -> None:
    assert samples(probed) and samples(probed)[-1]["workload"] == "job:probe.py"


@pytest.mark.slow
def test_a_new_optimizer_takes_over_after_20_steps_alone_while_the_old_one_lives(probed: Path) -> None:
    assert int(samples(probed)[-1]["steps"]) == 130 - 20  # its first 20 steps alone, then it is the job's
