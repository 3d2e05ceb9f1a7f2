"""``gpudash tune --allow-batch -- CMD``: a larger batch raced where the memory figures say it fits
(checked by running it, samples/s against samples/s), said where it cannot be, and answered as an edit
of the DataLoader call's batch size; ``--set batch_size=N`` reaches the job's training loader."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudash.job.settings import LOADER_SITE, Settings, describe, parse_set
from gpudash.stats.comparison import Estimate, estimate_from_batches
from gpudash.tune import job_race
from gpudash.tune.job_answer import notes
from gpudash.tune.job_edits import edits
from gpudash.tune.job_race import JobRace
from gpudash.tune.job_runs import Run

ROOT = Path(__file__).resolve().parents[1]
SLOW_READS = ROOT / "tests" / "data" / "jobs" / "slow_reads.py"
SITE = "/job/train.py:9"


def _steady(rate: float) -> Estimate:
    return estimate_from_batches([rate * (1 + (i % 3 - 1) / 100) for i in range(12)])


def _race(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    *,
    device: str = "cuda:0",
    memory: dict[str, int] | None = None,
    fails_from: int = 10**9,
    allow: bool = True,
    counted: bool = True,
) -> tuple[JobRace, Run, list[str]]:
    """A race on stand-in runs of a job at batch 16 whose samples/s grow with the batch (0.8% a
    sample, beyond the workers), which runs out of memory at ``fails_from`` samples a batch."""
    said: list[str] = []

    def fake_run(
        command: list[str], settings: Settings, seconds: float, path: Path, beat: Run | None = None, watch: bool = False
    ) -> Run:
        batch = int(dict(settings).get("batch_size", 16))
        run = Run(describe(settings), settings)
        if batch >= fails_from:
            run.error = "exit 1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.79 GiB."
            return run
        rate = 1000.0 * (1 + 0.008 * (batch - 16))
        run.samples, run.steps = (_steady(rate) if counted else None), _steady(rate / batch)
        run.started = {"device": device, "settings": {"num_workers": "0", "pin_memory": "True", "site": SITE}}
        run.memory = dict(memory if memory is not None else {"batch": 16, "fits_batch": 51})
        return run

    monkeypatch.setattr(job_race, "run_once", fake_run)
    monkeypatch.setattr(job_race, "_say", lambda quiet, text: said.append(text))
    monkeypatch.setattr(job_race.os, "sched_getaffinity", lambda pid: {0})
    args = argparse.Namespace(
        seconds=10.0, max_minutes=60.0, quiet=True, allow_numerics=False, allow_compile=False, allow_batch=allow
    )
    race = JobRace(["python", "train.py"], args, tmp_path)
    return race, race.race()[1], said


def _batches(race: JobRace) -> list[int]:
    return [int(dict(r.settings)["batch_size"]) for r in race.runs if "batch_size" in dict(r.settings)]


def test_the_largest_batch_said_to_fit_is_raced_last_and_kept_where_faster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    race, winner, _ = _race(monkeypatch, tmp_path)
    assert _batches(race) == [48]  # 51 said to fit: 5% off, a multiple of 8
    assert dict(winner.settings)["batch_size"] == "48" and dict(winner.settings)[LOADER_SITE] == SITE
    (note,) = notes({}, race.runs[0], winner)
    assert note.startswith("batch 48 instead of 16 changes the training") and "learning rate" in note


def test_a_batch_that_does_not_fit_falls_back_halfway_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    race, winner, _ = _race(monkeypatch, tmp_path, fails_from=40)
    assert _batches(race) == [48, 32]
    assert dict(winner.settings)["batch_size"] == "32"
    race, winner, _ = _race(monkeypatch, tmp_path, fails_from=20)
    assert _batches(race) == [48, 32] and "batch_size" not in dict(winner.settings)  # neither fits: as written


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"device": "cpu"}, "the job runs on the CPU"),
        ({"memory": {"batch": 16}}, "what fits is not known"),
        ({"memory": {"batch": 48, "fits_batch": 51}}, "batch 48 is about as large as fits (51)"),
        ({"counted": False}, "the job's samples are not counted"),
        ({"memory": {"batch": 16, "fits_batch": 51, "passes": 4}}, "the job accumulates gradients over 4 passes"),
    ],
)
def test_where_a_larger_batch_cannot_be_raced_it_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kw: dict[str, object], why: str
) -> None:
    race, winner, said = _race(monkeypatch, tmp_path, **kw)  # type: ignore[arg-type]
    assert _batches(race) == [] and "batch_size" not in dict(winner.settings)
    (told,) = [s for s in said if s.startswith("a larger batch not raced: ")]
    assert told.startswith(f"a larger batch not raced: {why}")


def test_without_allow_batch_no_batch_is_raced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    race, winner, said = _race(monkeypatch, tmp_path, allow=False)
    assert _batches(race) == [] and not [s for s in said if "batch" in s]


@pytest.mark.parametrize(
    ("call", "after"),
    [
        (
            "train = DataLoader(data, batch_size=args.batch, shuffle=True)\n",
            "train = DataLoader(data, batch_size=48, shuffle=True)\n",
        ),
        ("train = DataLoader(data, 16, shuffle=True)\n", "train = DataLoader(data, 48, shuffle=True)\n"),
        ("train = DataLoader(data, shuffle=True)\n", "train = DataLoader(data, shuffle=True, batch_size=48)\n"),
        (
            "train = DataLoader(\n    data,\n    16,\n    shuffle=True,\n)\n",
            "train = DataLoader(\n    data,\n    48,\n    shuffle=True,\n)\n",
        ),
        (
            "train = DataLoader(data, batch_size=int(args.bs), shuffle=True)\n",
            "train = DataLoader(data, batch_size=48, shuffle=True)\n",
        ),
        ('train = DataLoader(data, batch_size=cfg.get("bs", 32))\n', "train = DataLoader(data, batch_size=48)\n"),
        ("train = DataLoader(données, 16, shuffle=True)\n", "train = DataLoader(données, 48, shuffle=True)\n"),
        (
            "train = DataLoader(\n    data,  # the tokens\n    16,  # a GPU's worth\n)\n",
            "train = DataLoader(\n    data,  # the tokens\n    48,  # a GPU's worth\n)\n",
        ),
    ],
)
def test_the_answer_is_the_loaders_batch_size_replaced_by_position_or_added(
    tmp_path: Path, call: str, after: str
) -> None:
    script = tmp_path / "train.py"
    script.write_text(f"from torch.utils.data import DataLoader\n{call}")
    (edit,) = edits((("batch_size", "48"),), f"{script}:2", [sys.executable, str(script)])
    assert (edit.line, edit.before, edit.after) == (2, call, after)
    compile(script.read_text().replace(edit.before, edit.after), "train.py", "exec")


def test_a_call_whose_arguments_may_hide_the_batch_size_gets_no_edit(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("from torch.utils.data import DataLoader\ntrain = DataLoader(data, shuffle=True, **loader_kw)\n")
    assert edits((("batch_size", "48"),), f"{script}:2", []) == []  # it may be in **loader_kw: two would fail


def test_set_batch_size_is_a_count_of_one_or_more_for_the_loader_named() -> None:
    site = "loader_site=train.py:9"
    assert parse_set(["batch_size=64", site]) == (("batch_size", "64"), ("loader_site", "train.py:9"))
    with pytest.raises(ValueError, match="batch_size"):
        parse_set(["batch_size=0", site])
    with pytest.raises(ValueError, match="give loader_site=FILE:LINE too"):
        parse_set(["batch_size=64"])  # every loader of the job would change, its evaluation's too


@pytest.mark.slow
def test_set_batch_size_reaches_the_training_loader_alone(tmp_path: Path) -> None:
    """The job's training loader takes 4 samples a batch; the evaluation loader made apart keeps its 16."""
    out = tmp_path / "r.csv"
    job = [sys.executable, str(SLOW_READS), "--steps", "300", "--read-ms", "0"]
    line = next(n for n, x in enumerate(SLOW_READS.read_text().splitlines(), 1) if "loader = DataLoader(" in x)
    sets = ["--set", "batch_size=4", "--set", f"loader_site={SLOW_READS}:{line}"]
    done = subprocess.run(
        [sys.executable, "-m", "gpudash", "record", str(out), "-q", *sets, "--", *job],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["memory"]["batch"] == 4
    assert "JOB loaders train_workers=0 eval_workers=0 eval_batch=16" in done.stdout
