"""``gpudash tune -- CMD`` on stand-in runs: how far the worker climb goes (past the CPUs while the
workers' busy share leaves room, at every count while their memory fits in what is free, never past
the guard's ceiling) and the answer as one typed JSON document (issue 61, item 3)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpudash.job.settings import LOADER_SITE, Settings, describe
from gpudash.stats.comparison import Estimate, estimate_from_batches
from gpudash.tune import job_answer, job_race, job_runs
from gpudash.tune.job_edits import edits
from gpudash.tune.job_race import JobRace, worker_ladder
from gpudash.tune.job_runs import Run
from gpudash.tune.worker_cpu import GIB, WorkerCpu, WorkerMemory

SCRIPT = """import torch
from torch.utils.data import DataLoader

train = DataLoader(
    list(range(64)),
    batch_size=8,
    shuffle=True,
)
"""
DOUBLING = {0: 440.0, 1: 424.0, **{2**k: 880.0 * 2 ** (k - 1) for k in range(1, 7)}}  # 2 → 880 … 64 → 28160


def steady(rate: float) -> Estimate:
    """A run's figure: twelve windows within 1% of ``rate``."""
    return estimate_from_batches([rate * (1 + (i % 3 - 1) / 100) for i in range(12)])


def _race(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    rates: dict[int, float],
    busy: float,
    *,
    job_has: dict[str, str] | None = None,
    allow: bool = False,
    cpus: int = 2,
    memory: Callable[[int], WorkerMemory] | None = None,
    site: str = "/job/train.py:9",
    quiet: bool = True,
) -> tuple[JobRace, Run]:
    """A race over stand-in runs (``rates``: samples/s by worker count, 0 the job as written; each
    worker ``busy`` of a CPU and holding ``memory(count)``; ``job_has``: what the job's first step
    says of its model; ``allow``: ``--allow-numerics --allow-compile``) on ``cpus`` CPUs: the race
    and its winner."""

    def fake_run(
        command: list[str], settings: Settings, seconds: float, path: Path, beat: Run | None = None, watch: bool = False
    ) -> Run:
        workers = int(dict(settings).get("num_workers", 0))
        rate = rates[workers] * (1.02 if dict(settings).keys() - {"num_workers", LOADER_SITE} else 1.0)
        run = Run(describe(settings), settings, samples=steady(rate))
        model = {"autocast": "False", "compiled": "False"} if job_has is None else job_has
        said = {"tf32": "False", **model, "num_workers": "0", "pin_memory": "False", "site": site}
        run.started = {"device": "cpu", "settings": said}
        run.worker_busy = busy if workers else None
        run.worker_memory = memory(workers) if memory is not None and workers else None
        return run

    monkeypatch.setattr(job_race, "run_once", fake_run)
    monkeypatch.setattr(job_race.os, "sched_getaffinity", lambda pid: set(range(cpus)))
    args = argparse.Namespace(seconds=10.0, max_minutes=60.0, quiet=quiet, allow_numerics=allow, allow_compile=allow)
    race = JobRace(["python", "train.py"], args, tmp_path)
    return race, race.race()[1]


def race_with(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rates: dict[int, float], busy: float, **kw: Any
) -> list[str]:
    """``_race``'s runs, by their settings, in the order run."""
    race, _ = _race(monkeypatch, tmp_path, rates, busy, **kw)
    return [r.name for r in race.runs]


def _counts(names: list[str]) -> list[int]:
    return [int(n.split("=")[1]) for n in names if n.startswith("num_workers=") and "," not in n]


def test_the_worker_ladder_climbs_in_powers_of_two_to_the_guards_ceiling() -> None:
    assert worker_ladder(0, 2) == [1, 2, 4, 8, 16, 32, 64]
    assert worker_ladder(2, 16) == [4, 8, 16, 32, 64]
    assert worker_ladder(0, 128)[-2:] == [64, 128]  # more CPUs than the guard: up to the CPUs
    plain = argparse.Namespace(seconds=30.0, max_minutes=10.0, allow_numerics=False, allow_compile=False)
    line = job_race.plan_line(plain, 2)  # said before the race: 5 runs, and 5 more past the CPUs at most
    assert line.startswith("racing your job: about 5 runs of 30 s, about 3 min (--max-minutes 10 stops it at 10)")
    assert "where the workers mostly wait, up to 5 more past the 2 CPUs" in line
    assert line.endswith("64 workers at most)") and "four times" not in line
    short = job_race.plan_line(argparse.Namespace(**{**vars(plain), "max_minutes": 2.0}), 2)
    assert "about 3 min (--max-minutes 2 stops it at 2)" in short  # the budget cuts the plan, said so


def test_the_climb_goes_on_past_one_slower_worker_and_past_the_cpus_only_while_the_workers_wait(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rates = {0: 440.0, 1: 424.0, 2: 880.0, 4: 1770.0, 8: 3000.0, 16: 3000.0}
    waiting = race_with(monkeypatch, tmp_path, rates, busy=0.1)
    assert _counts(waiting) == [1, 2, 4, 8, 16]  # 32 workers 10% busy would need 3.2 of the 2 CPUs
    computing = race_with(monkeypatch, tmp_path, rates, busy=0.9)
    assert "num_workers=4" not in computing and "num_workers=2" in computing  # 2 CPUs: no more
    one_cpu = race_with(monkeypatch, tmp_path, rates, busy=0.1, cpus=1)  # one worker slower, but waiting
    assert _counts(one_cpu) == [1, 2, 4, 8]


def test_workers_three_percent_busy_climb_to_16_on_2_cpus_while_each_doubling_doubles_the_rate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 61: such a loader stopped at 8 workers (four times the CPUs) although 16 doubled it again."""
    rates = {**DOUBLING, 32: DOUBLING[16], 64: DOUBLING[16]}  # no faster past 16
    race, best = _race(monkeypatch, tmp_path, rates, busy=0.03)
    assert best.name == "num_workers=16" and race.stopped is None  # two counts no faster ended it
    assert _counts([r.name for r in race.runs]) == [1, 2, 4, 8, 16, 32, 64]
    race, best = _race(monkeypatch, tmp_path, DOUBLING, busy=0.03)  # faster all the way: the guard stops it
    assert best.name == "num_workers=64"
    assert race.stopped == "stopped at 64 workers: the guard's ceiling (64 a rank)"


def test_the_workers_busy_share_stops_the_climb_past_the_cpus_and_the_progress_line_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    race, best = _race(monkeypatch, tmp_path, DOUBLING, busy=0.2, quiet=False)
    assert best.name == "num_workers=8" and "num_workers=16" not in [r.name for r in race.runs]
    said = "stopped at 8 workers: 16 would need ~3.2 CPUs of the 2: the workers' busy share (20% of a CPU each)"
    assert race.stopped == said and f"gpudash: {said}" in capsys.readouterr().err.splitlines()


def test_workers_memory_that_leaves_no_room_stops_the_climb_and_says_how_much(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """1 GiB a worker on a machine with 12 GiB free before them: 8 workers leave 4 GiB, and 8 more
    would need 8 GiB of it, though their busy share would let the climb go on."""

    def memory(n: int) -> WorkerMemory:
        return WorkerMemory(per_worker=GIB, free=(12 - n) * GIB)

    def none_free(n: int) -> WorkerMemory:
        return WorkerMemory(per_worker=GIB, free=0.5 * GIB)

    race, best = _race(monkeypatch, tmp_path, DOUBLING, busy=0.03, memory=memory)
    assert best.name == "num_workers=8" and _counts([r.name for r in race.runs]) == [1, 2, 4, 8]
    assert race.stopped is not None and race.stopped.startswith(
        "stopped at 8 workers: 8 more would need ~8 GiB of the 4 GiB free (1 GiB a worker;"
    )
    race, best = _race(monkeypatch, tmp_path, DOUBLING, busy=0.03, memory=none_free)
    assert _counts([r.name for r in race.runs]) == [1] and best.name == "as written"
    assert race.stopped is not None and race.stopped.startswith(
        "stopped at 1 worker: 1 more would need ~1 GiB of the 512 MiB free"
    )


def test_every_setting_in_the_json_is_typed_in_the_winner_and_every_candidate(tmp_path: Path) -> None:
    """``num_workers: 8``, not ``"8"``: the settings' text parsed in one place (``job_runs.typed``)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    given = (
        ("num_workers", "8"),
        ("prefetch_factor", "4"),
        ("pin_memory", "True"),
        ("persistent_workers", "True"),
        ("tf32", "True"),
        ("compile", "True"),
        ("autocast", "bf16"),
        (LOADER_SITE, f"{script}:4"),
    )
    base, winner = Run("as written", (), samples=steady(440.0)), Run(describe(given), given, samples=steady(900.0))
    winner.worker_busy, winner.worker_memory = 0.03, WorkerMemory(GIB / 4, 8 * GIB)
    found = edits(given, f"{script}:4", [sys.executable, str(script)])
    doc = json.loads(json.dumps(job_answer.answer(base, winner, [base, winner], found)))
    assert doc["winner"]["settings"] == {
        "num_workers": 8,
        "prefetch_factor": 4,
        "pin_memory": True,
        "persistent_workers": True,
        "tf32": True,
        "compile": True,
        "autocast": "bf16",
        LOADER_SITE: f"{script}:4",
    }
    assert doc["baseline"]["settings"] == {} and doc["candidates"][1]["settings"] == doc["winner"]["settings"]
    assert doc["candidates"][1]["worker_memory_gib"] == 0.25 and doc["candidates"][0]["worker_memory_gib"] is None
    assert doc["diff"].startswith(f"--- a{script}") and "+    num_workers=8,\n" in doc["diff"]
    assert job_answer.answer(base, base, [base], [])["diff"] is None  # no edit: no diff


def test_tune_json_diff_writes_one_document_on_stdout_with_the_diff_in_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 61: ``--json --diff`` printed the diff after the document, so stdout no longer parsed."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    _race(monkeypatch, tmp_path, {0: 440.0, 1: 424.0, 2: 880.0, 4: 880.0, 8: 880.0}, busy=0.9, site=f"{script}:4")
    monkeypatch.setattr(job_answer, "_draw", lambda out, runs, doc: [])  # (the chart: not this test's)
    out = tmp_path / "t"
    code = job_race.main(["--json", "--diff", "--seconds", "10", "--out", str(out), "--", sys.executable, str(script)])
    said = capsys.readouterr()
    assert code == 0 and said.err.startswith("gpudash: racing your job")  # progress on stderr
    doc = json.loads(said.out)  # the whole of stdout: one document
    assert doc["winner"]["settings"] == {"num_workers": 2, LOADER_SITE: f"{script}:4"}
    assert "+    num_workers=2,\n" in doc["diff"] and doc["climb_stopped"].startswith("stopped at 2 workers: 4 would")
    assert json.loads((out / "tune.json").read_text()) == doc
    assert (out / "tune.csv").read_text().splitlines()[2].startswith("num_workers=1,")  # the CSV stays text
    if shutil.which("patch") is not None:
        done = subprocess.run(["patch", "-p1", "-d", "/"], input=doc["diff"], capture_output=True, text=True)
        assert done.returncode == 0 and "num_workers=2," in script.read_text(), done.stdout + done.stderr


def test_the_worker_reading_finds_forked_workers_and_what_they_hold() -> None:
    """The tree under ``gpudash record``: the job (left out) and its forks, the workers, each
    holding 32 MiB of its own."""
    job = (
        "import os, time\n"
        "kids = []\n"
        "for _ in range(2):\n"
        "    kids.append(os.fork())\n"
        "    if kids[-1] == 0:\n"
        "        block = b'x' * (32 << 20)\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "for pid in kids:\n"
        "    os.waitpid(pid, 0)\n"
    )
    launcher = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {job!r}])"  # as gpudash record is
    root = subprocess.Popen([sys.executable, "-c", launcher], start_new_session=True)
    try:
        workers = WorkerCpu(root.pid)
        for _ in range(100):  # until both are seen holding their blocks
            workers.read()
            if workers.count == 2 and workers.memory is not None and workers.memory.per_worker >= 32 << 20:
                break
            time.sleep(0.05)
        assert workers.count == 2 and workers.busy is not None
        assert workers.memory is not None and workers.memory.per_worker >= 32 << 20 and workers.memory.free > 0
    finally:
        os.killpg(root.pid, signal.SIGKILL)  # the group this test started: the launcher, the job, its workers
        root.wait(30)


def test_a_runs_progress_line_gives_its_workers_busy_share_and_memory() -> None:
    run = Run("num_workers=4", (("num_workers", "4"),), samples=steady(1000.0))
    run.worker_busy, run.worker_memory = 0.03, WorkerMemory(GIB / 8, 4 * GIB)
    assert job_runs.shown(run) == "1,000 samples/s, workers 3% busy, 128 MiB each"
