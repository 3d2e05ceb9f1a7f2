"""What several test files repeated, in one place: command lines, child processes, expected data.
No assertions here: each test keeps its own."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from gpudash.host.host_budget import available_cpus

# gpudash refuses more CPU ranks than CPUs it may use (``--nproc 2`` on one CPU is one line and exit 2):
# a test that starts two CPU ranks through gpudash needs two, and says so where it skips (taskset -c 0)
needs_two_cpus = pytest.mark.skipif(
    available_cpus() < 2, reason="two CPU ranks need two CPUs this process may use (gpudash refuses more ranks)"
)

if TYPE_CHECKING:
    from gpudash.diagnosis.judge import Judgement
    from workloads.base import Workload, WorkloadOptions

    W = TypeVar("W", bound=Workload)

ROOT = Path(__file__).resolve().parents[1]
GPUDASH = [sys.executable, "-m", "gpudash"]  # gpudash as a child process: its arguments follow

# The CSV of version 0.1: recordings made then must still replay, and pandas users'
# column names must not move. A new metric appends a column; it never renames one.
CSV_COLUMNS_0_1 = [
    "row_kind",
    "time_s",
    "workload",
    "variant",
    "batch_size",
    "steps",
    "samples",
    "interval_s",
    "steps_per_s",
    "samples_per_s",
    "step_ms_p50",
    "step_ms_p95",
    "syncs_per_step",
    "loss",
    "gpu_util_pct",
    "mem_bw_util_pct",
    "mem_used_mib",
    "mem_total_mib",
    "power_w",
    "sm_clock_mhz",
    "temp_c",
    "energy_j",
    "throttle",
    "joules_per_step",
    "event_kind",
    "event_what",
    "event_before",
    "event_after",
    "event_message",
]


BOOT = ROOT / "gpudash" / "boot"  # the job's bootstrap folder: sitecustomize.py and the gpudash_boot package


def checkout_first_on_path() -> str:
    """A ``PYTHONPATH`` with this checkout first, then the suite's own (``tests/conftest.py``'s
    folder whose ``sitecustomize`` lets a process exit without scanning torch's heap)."""
    return os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))


def ctrl_c_reaches_it() -> None:
    """A child's SIGINT as a terminal's Ctrl-C finds it (``preexec_fn``): the default action, even
    where the tests run from a background shell, which starts them with SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def record_args(path: str | Path, *more: str) -> list[str]:
    """``--record PATH`` of sync_loss's fixed variant on the CPU, then ``more``."""
    return ["--record", str(path), "-w", "sync_loss", "-v", "fixed", "--device", "cpu", *more]


def timing(repeats: int = 1, seconds: float = 1, warmup: float = 0.5, device: str = "cpu") -> list[str]:
    """A sweep's measuring options: ``--repeats R --seconds S --warmup W --device D``."""
    return ["--repeats", str(repeats), "--seconds", str(seconds), "--warmup", str(warmup), "--device", device]


def run_gpudash(
    *args: str, cwd: Path | None = None, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m gpudash ARGS`` as a user runs it, in ``cwd``, with this environment and ``env``
    over it; its output captured."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([*GPUDASH, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=full_env)


def gpudash_in_bare_env(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m gpudash ARGS`` in ``cwd`` with only PYTHONPATH (this checkout) and a system PATH set,
    its output captured."""
    return subprocess.run(
        [*GPUDASH, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=240,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def record_rows(cwd: Path, *more: str) -> list[dict[str, str]]:
    """Record ``run.csv`` in ``cwd`` (``record_args``, then ``more`` and ``-q``), check that it exits 0,
    and read its rows."""
    out = gpudash_in_bare_env(*record_args("run.csv", *more, "-q"), cwd=cwd)
    assert out.returncode == 0, out.stderr
    with (cwd / "run.csv").open() as f:
        return list(csv.DictReader(f))


def run_under_cuda_sanitizer(code: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` from the repository root with ``TORCH_CUDA_SANITIZER=1``, its output captured."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "TORCH_CUDA_SANITIZER": "1"},
        timeout=600,
        cwd=ROOT,
    )


def pipeline_pairs() -> list[tuple[str, str, str]]:
    """(family, serial variant, pipelined variant) of every family the ``p`` key toggles."""
    from workloads.registry import FAMILIES

    return [(f.name, *f.pipeline_toggle) for f in FAMILIES.values() if f.pipeline_toggle is not None]


def slow_if_real(*case: str) -> object:
    """A parametrize case for a family, marked ``slow`` when the family is a real network (its
    first name a torchvision family: ResNet-50 or ViT-B/16 take seconds a step on the 2-core CPU)."""
    import pytest

    from workloads.registry import FAMILIES

    real = case[0] in FAMILIES and FAMILIES[case[0]].source is not None
    return pytest.param(*case, marks=pytest.mark.slow) if real else (case if len(case) > 1 else case[0])


@contextmanager
def build_as(kind: type[W], name: str, device: Any, options: WorkloadOptions | None = None) -> Iterator[W]:
    """``with workloads.factory.build(...)`` for a test that reaches past the base class into one
    family's own members (``EncDecWorkload.encode``): the workload, checked to be a ``kind``."""
    from workloads.factory import build

    with build(name, device, options) as workload:
        if not isinstance(workload, kind):
            raise TypeError(f"{name} built a {type(workload).__name__}, not a {kind.__name__}")
        yield workload


def act_when(
    proc: subprocess.Popen[str], ready: Callable[[], bool], act: Callable[[], object], wait_s: float, end_s: float = 120
) -> str:
    """Poll ``ready()`` while ``proc`` runs (up to ``wait_s``), then ``act()`` (a signal, a kill) and
    wait up to ``end_s`` for ``proc`` to end: its stderr. ``proc`` is killed if anything fails."""
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and proc.poll() is None and not ready():
            time.sleep(0.2)
        act()
        return proc.communicate(timeout=end_s)[1]
    finally:
        if proc.poll() is None:
            proc.kill()


_Shared = TypeVar("_Shared")


def once_per_session(factory: Any, key: str, compute: Callable[[], _Shared]) -> _Shared:
    """``compute()`` once per test session, shared by pytest-xdist's workers: a module-scoped fixture
    runs in each worker that takes one of its module's tests, so the first worker to ask computes
    the (picklable) result under a lock, beside the workers' temp dirs, and the others read it.
    ``factory``: the session's ``tmp_path_factory``; ``key``: a file name of its own."""
    import fcntl
    import pickle

    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # pytest-N/, shared by the workers' popen-gwN/
    store = root / f"{key}.pickle"
    with (root / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if store.exists():
            return pickle.loads(store.read_bytes())  # noqa: S301 - written by this session's own workers
        value = compute()
        store.write_bytes(pickle.dumps(value))
        return value


EVIDENCE = Path(__file__).parent / "data" / "evidence"


def cpu_backend() -> str:
    """torch.compile's backend for a CPU test: inductor where a C++ compiler is present (it builds its
    kernels with one), else dynamo's eager backend."""
    import shutil

    return "inductor" if any(shutil.which(cc) for cc in ("g++", "c++", "clang++")) else "eager"


def measured_evidence(name: str) -> Any:
    """A diagnosis' evidence as ``diagnose --json`` printed it on GPUs (``tests/data/evidence/NAME``,
    copied from the run's output under docs/bench; its settings and collective kinds as objects, as
    the hooks send them now), its sync table included."""
    import json

    from gpudash.diagnosis.evidence import Evidence

    return Evidence.from_dict(json.loads((EVIDENCE / name).read_text())["evidence"])


def verdict_of(event: Any) -> Judgement:
    """A diagnosis event's judgement, which its source made (fails where it has none)."""
    from gpudash.diagnosis.judge import judgement_of

    found = judgement_of(event)
    assert found is not None, f"no judgement on {event!r}"
    return found


def replayed_event(row: dict[str, str]) -> Any:
    """An event row of a recording (``csv.DictReader``'s) read back as a replay reads it."""
    from gpudash.recording.csvformat import RowParser

    (event,) = RowParser(list(row)).messages(list(row.values()))
    return event


def script_verdict(evidence: Any) -> Any:
    """The verdict on a user's job's ``evidence`` (in a script's words), as its session's judge makes it."""
    from gpudash.diagnosis.judge import Findings, judge

    return judge(Findings(evidence, script=True)).verdict
