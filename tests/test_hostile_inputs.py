"""Bad input is one line and exit 2, refused before any file is created (issue 23).

One table of hostile command lines and settings drives the parametrized tests: each case runs
``gpudash`` in-process in an empty folder, and must print exactly one ``gpudash: error:`` line (no
traceback), exit 2, and leave the folder as it found it. Cases that could hang the test (a FIFO,
a closed stdout) run in a subprocess with a timeout. The caps on processes (``--nproc``,
``--workers``, the PID budget, host memory) refuse before the first process is spawned, so no
case here starts a workload; the cgroup cases run where this machine lets the test make one.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpudash.arguments import config
from gpudash.cli.main import main
from gpudash.host import host_budget
from tests.helpers import needs_two_cpus

LONG = "x" * 300  # one name over the 255 bytes of every common file system
DEEP = "/".join(["d" * 200] * 22)  # a path over PATH_MAX (4096)
CASE_TIMEOUT_S = 60
RECORDINGS = {"replay.csv": Path(__file__).parent / "tui" / "data" / "replay.csv"}  # a real recording


@dataclass(frozen=True)
class Case:
    """A hostile command line: what it is, its arguments, its environment, what the line says."""

    name: str
    argv: list[str]
    says: str
    env: dict[str, str] = field(default_factory=dict)
    setup: str = ""  # "csv", "json": that file exists in the folder before the run


CASES = [
    # -- caps: nothing may take the box down (cause 1, 2) ---------------------------------------------
    Case(
        "nproc-64",
        ["record", "np64.csv", "--nproc", "64", "--device", "cpu", "--duration", "30"],
        "--nproc 64: each rank on the CPU needs a CPU of its own",
    ),
    Case(
        "nproc-huge",
        ["record", "np.csv", "--nproc", "100000000", "--device", "cpu"],
        "--nproc 100000000: each rank on the CPU needs a CPU of its own",
    ),
    Case("nproc-auto", ["record", "np.csv", "--nproc", "64"], "--nproc 64: each rank on the CPU needs a CPU"),
    Case(
        "workers-huge",
        ["record", "wk.csv", "-w", "input_pipeline", "-v", "workers", "--workers", "100000", "--steps", "3"],
        "--workers 100000: more loader workers per rank than the",
    ),
    Case(
        "workers-dashboard",
        ["-w", "input_pipeline", "-v", "workers", "--workers", "100000"],
        "--workers 100000: more loader workers per rank",
    ),
    Case(
        "sweep-nproc",
        ["sweep", "-w", "sync_loss", "--device", "cpu", "--nproc", "64", "--out", "sw"],
        "--nproc 64: each rank on the CPU needs a CPU",
    ),
    # -- the memory guard's setting (cause 7) --------------------------------------------------------------
    *[
        Case(
            f"memory-limit-{i}",
            ["record", "m.csv", "--steps", "1"],
            f"GPUDASH_MEMORY_LIMIT={value}:",
            env={"GPUDASH_MEMORY_LIMIT": value},
        )
        for i, value in enumerate(["abc", "0%", "150%", "-1G", "1e3G", "5 potatoes", "0G", "nan%"])
    ],
    Case(
        "memory-limit-sweep",
        ["sweep", "-w", "sync_loss", "--device", "cpu", "--out", "sw"],
        "GPUDASH_MEMORY_LIMIT=abc:",
        env={"GPUDASH_MEMORY_LIMIT": "abc"},
    ),
    Case(
        "memory-limit-dashboard", [], "GPUDASH_MEMORY_LIMIT=12 potatoes:", env={"GPUDASH_MEMORY_LIMIT": "12 potatoes"}
    ),
    # -- names the file system refuses (cause 8) -----------------------------------------------------------
    Case("long-record", ["record", f"{LONG}.csv", "--steps", "1"], "File name too long"),
    Case("long-meta", ["record", "ok.csv", "--meta", f"{LONG}.json", "--steps", "1"], "File name too long"),
    Case("long-log", ["record", "ok.csv", "--log", f"{LONG}.log", "--steps", "1"], "File name too long"),
    Case("long-default-meta", ["record", f"{'y' * 253}.c", "--steps", "1"], "File name too long"),
    Case("deep-record", ["record", f"{DEEP}/run.csv", "--steps", "1"], "File name too long"),
    Case("long-sweep-out", ["sweep", "-w", "sync_loss", "--device", "cpu", "--out", LONG], "File name too long"),
    Case("long-report-out", ["report", "replay.csv", "--out", LONG], "File name too long", setup="replay.csv"),
    # -- what a path may be (cause 10, 13) --------------------------------------------------------------
    Case("char-device", ["record", "/dev/null", "--steps", "1"], "is a character device, not a regular file"),
    Case("full-device", ["record", "/dev/full", "--steps", "1"], "is a character device, not a regular file"),
    Case(
        "meta-exists",
        ["record", "y5.csv", "--steps", "1"],
        "the metadata file y5.json exists; give --force",
        setup="y5.json",
    ),
    Case(
        "named-meta-exists",
        ["record", "z.csv", "--meta", "y5.json", "--steps", "1"],
        "y5.json exists; give --force",
        setup="y5.json",
    ),
    Case("csv-exists", ["record", "y5.csv", "--steps", "1"], "y5.csv exists; give --force", setup="y5.csv"),
    # -- GPUs the machine lacks (cause 12) ----------------------------------------------------------------
    Case("gpus-without-gpus", ["record", "g1.csv", "--gpus", "0", "--steps", "1"], "--gpus 0: no GPU to watch here"),
]


@pytest.fixture
def empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    yield folder


def _has_gpu() -> bool:
    from gpudash.host.gpu_checks import cuda_devices

    return cuda_devices()[0] > 0


def run_cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_input_is_one_line_exit_2_and_creates_nothing(
    case: Case, empty_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if case.name.startswith(("nproc", "sweep-nproc", "gpus")) and _has_gpu():
        pytest.skip("a machine with GPUs answers these with its GPUs (tests/test_ddp.py, tests/test_gpus.py)")
    for key, value in case.env.items():
        monkeypatch.setenv(key, value)
    if case.setup in RECORDINGS:
        (empty_folder / case.setup).write_bytes(RECORDINGS[case.setup].read_bytes())
    elif case.setup:
        (empty_folder / case.setup).write_text("kept\n")
    before = sorted(p.name for p in empty_folder.iterdir())
    code = run_cli(case.argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("gpudash: error: "), err
    assert case.says in lines[0]
    assert sorted(p.name for p in empty_folder.iterdir()) == before, "a refused run created files"
    if case.setup and case.setup not in RECORDINGS:
        assert (empty_folder / case.setup).read_text() == "kept\n"


# -- cases that would hang or lose the test's own output: a subprocess with a timeout -----------------------
def _gpudash(argv: list[str], cwd: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpudash", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CASE_TIMEOUT_S,
        **kwargs,
    )  # type: ignore[call-overload]


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("gpudash: error: "), proc.stderr
    return lines[0]


def test_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    """Opening a FIFO for writing blocks until a reader comes: the check must not open it."""
    os.mkfifo(tmp_path / "fifo.csv")
    line = _one_error_line(_gpudash(["record", "fifo.csv", "--steps", "1"], tmp_path))
    assert "--record fifo.csv is a FIFO, not a regular file" in line


def test_a_closed_stdout_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        f"exec {sys.executable} -m gpudash record - --steps 3 >&-",
        shell=True,
        cwd=tmp_path,
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        timeout=CASE_TIMEOUT_S,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and lines == ["gpudash: error: --record -: standard output is closed; give a file name"]
    assert list(tmp_path.iterdir()) == []


def test_stdout_on_dev_full_is_refused(tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "gpudash", "record", "-", "--steps", "3"],
            cwd=tmp_path,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=CASE_TIMEOUT_S,
        )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip() == "gpudash: error: --record -: standard output is /dev/full, where nothing can be written"
    )


# -- the PID budget: RLIMIT_NPROC and a cgroup's pids.max ----------------------------------------------------
def test_the_pid_budget_of_rlimit_nproc_is_checked_before_anything_starts(tmp_path: Path) -> None:
    """A soft RLIMIT_NPROC just above what this user runs now: the run's processes would not fit."""
    used = host_budget._user_processes()
    assert used is not None
    # room for 2 processes, none of them the margin the check keeps: the run (3 at least, plus the
    # margin) is refused even if another test's processes end between this count and gpudash's
    limit = used + 2

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, resource.getrlimit(resource.RLIMIT_NPROC)[1]))

    line = _one_error_line(
        _gpudash(["record", "r.csv", "-w", "sync_loss", "--device", "cpu", "--steps", "1"], tmp_path, preexec_fn=lower)
    )
    assert "processes" in line and f"RLIMIT_NPROC {limit} (ulimit -u)" in line
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def cgroup_v1(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A cgroup of this test's own under the v1 controller ``request.param``, removed afterwards;
    skipped where the machine does not let the test make one (not root, cgroup v2 only, read-only)."""
    root = Path("/sys/fs/cgroup") / request.param
    folder = root / f"gpudash-test-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a {request.param} cgroup here ({exc.strerror}): the check is not exercised")
    try:
        yield folder
    finally:
        try:
            folder.rmdir()
        except OSError:
            pass


def _in_cgroup(folder: Path) -> object:
    def enter() -> None:
        (folder / "cgroup.procs").write_text(str(os.getpid()))

    return enter


@pytest.mark.parametrize("cgroup_v1", ["pids"], indirect=True)
def test_a_cgroups_pids_max_is_checked_before_anything_starts(cgroup_v1: Path, tmp_path: Path) -> None:
    # the python process and its threads fit; a run's processes (2 at least: the workload process and
    # its resource tracker) do not, beside the margin gpudash keeps free — on any count of CPUs
    limit = host_budget.PROCESS_MARGIN + 1
    (cgroup_v1 / "pids.max").write_text(str(limit))
    line = _one_error_line(
        _gpudash(
            ["record", "p.csv", "-w", "sync_loss", "--device", "cpu", "--steps", "1"],
            tmp_path,
            preexec_fn=_in_cgroup(cgroup_v1),
        )
    )
    assert f"the cgroup's pids.max {limit}" in line and "kept free" in line
    assert list(tmp_path.iterdir()) == []


@needs_two_cpus
@pytest.mark.parametrize("cgroup_v1", ["memory"], indirect=True)
def test_ranks_that_would_not_fit_in_a_cgroups_memory_are_refused_before_they_start(
    cgroup_v1: Path, tmp_path: Path
) -> None:
    (cgroup_v1 / "memory.limit_in_bytes").write_text(str(1024 * 2**20))  # 1 GiB: under 3 × 640 MiB
    proc = _gpudash(
        ["record", "d.csv", "-w", "sync_loss", "-v", "fixed", "--device", "cpu", "--nproc", "2", "--steps", "1"],
        tmp_path,
        preexec_fn=_in_cgroup(cgroup_v1),
    )
    line = _one_error_line(proc)
    assert "--nproc 2: the ranks and their launcher need about 1.88 GiB of host memory" in line
    left = re.search(r"and (\d+) MiB is left under the cgroup's memory limit of 1 GiB", line)  # less gpudash's own
    assert left is not None and 900 < int(left.group(1)) < 1024, line


def test_the_process_plan_counts_ranks_their_forkservers_and_workers() -> None:
    assert host_budget.ProcessPlan(ranks=1, workers_per_rank=4).processes == 2 + 4
    assert host_budget.ProcessPlan(ranks=2, workers_per_rank=3).processes == 2 + 2 * 2 + 2 * 3
    assert host_budget.ProcessPlan(ranks=2, workers_per_rank=0).torch_processes == 3


# -- the settings file's bad values: warnings naming it, the defaults used (cause 11) --------------------------
def test_a_settings_batch_size_over_the_limit_is_a_warning_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("workload = 'encdec'\nbatch_size = 5000\n")
    loaded = config.load(path)
    assert "batch_size" not in loaded.values and loaded.values["workload"] == "encdec"
    assert loaded.problems == (
        f"config {path}: batch_size = 5000: batch 5000 is over encdec's limit of 4096; using the default",
    )


def test_the_command_warns_about_the_settings_file_and_goes_on(tmp_path: Path) -> None:
    """The run gets past the settings file (here to the next check, an existing CSV) with one warning."""
    (tmp_path / "cfg" / "gpudash").mkdir(parents=True)
    (tmp_path / "cfg" / "gpudash" / "config.toml").write_text("batch_size = 5000\n")
    (tmp_path / "y.csv").write_text("kept\n")
    proc = _gpudash(
        ["record", "y.csv", "--steps", "1"], tmp_path, env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 2, proc.stderr
    assert lines[0].startswith("gpudash: warning: config ") and "config.toml: batch_size = 5000" in lines[0]
    assert (
        lines[0].endswith("using the default")
        and lines[1] == "gpudash: error: y.csv exists; give --force to overwrite it, or another name"
    )


# -- a first configuration the workload refuses: one line, exit 2, nothing left behind (cause 6) ---------------
@pytest.mark.slow
def test_a_first_batch_that_would_not_fit_is_one_line_exit_2_and_leaves_no_files(tmp_path: Path) -> None:
    """The README's own example, smaller: the workload measures the batch, refuses it, and nothing
    stays. At 128 px (the README's 512 px probes take 16 times the CPU) batch 1000 needs about 7.5 GiB:
    more than a 2 GiB memory guard leaves, on any machine."""
    proc = _gpudash(
        ["record", "x.csv", "-w", "sync_loss", "-b", "1000", "--image-size", "128", "--steps", "3", "--device", "cpu"],
        tmp_path,
        env={**os.environ, "GPUDASH_MEMORY_LIMIT": "2G"},
    )
    line = _one_error_line(proc)
    assert line.startswith("gpudash: error: batch 1000 needs about ") and "of host memory" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_log_is_replaced_not_appended_and_the_run_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "r.log").write_text("an old run's log\n")
    proc = _gpudash(
        ["record", "r.csv", "-w", "sync_loss", "--image-size", "16", "--device", "cpu", "--steps", "3", "-q"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "an old run's log" not in (tmp_path / "r.log").read_text()
    assert (tmp_path / "r.csv").exists() and (tmp_path / "r.json").exists()
