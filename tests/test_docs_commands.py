"""Every ``gpudash`` command line the README and docs/ show in a shell block works as written (issue
62), pasted as a user pastes it, in a folder that holds what the pages assume: a ``train.py`` and a
``run.sh``, ``examples/`` and ``path/to/mine.py``, and for ``report`` a recording ``run.csv``.

A command that ends by itself (``list``, ``report``, ``diagnose`` of the 400-step ``train.py``)
exits 0. One that runs until stopped shows it runs — its arguments all accepted (gpudash checks
every one before anything starts) and its first line said (for a job: its first step seen), or for
a quiet one a sample row in the recording it writes, else a few seconds gone by — and is then
stopped as a person stops it, with a Ctrl-C,
ending with 0 or 130. Neither says an error or a traceback. What cannot run on this machine is named with its
reason (``NOT_HERE``): a GPU, NVML, a terminal for the dashboard, a browser for ``serve``, a second
machine; the test that lists them fails on a command no rule names, so a new page's command is run
or said why not.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import checkout_first_on_path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCK = re.compile(r"^[ \t]*```(?:bash|sh|shell|console)\n(.*?)^[ \t]*```", re.S | re.M)
QUIET_S = 10.0  # a command that says nothing: this long running (or its recording's first sample row), it runs
FIRST_LINE_S = 180.0  # the most a command takes to say it runs, or to end by itself, on a loaded machine
STOPPED_S = 60.0  # and to end once Ctrl-C'd
SUBCOMMANDS = ("run", "record", "diagnose", "list", "replay", "sweep", "tune", "report", "watch", "serve")
TRAIN_PY = """import argparse, torch
from torch.utils.data import DataLoader, TensorDataset
args, _ = argparse.ArgumentParser().parse_known_args()  # --lr 3e-4 and the like
data = TensorDataset(torch.randn(6400, 8), torch.randn(6400, 1))  # 400 steps of 16
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(data, batch_size=16):
    (model(x) - y).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
"""


@dataclass(frozen=True)
class Shown:
    """A command line as a page shows it."""

    page: str
    line: int
    text: str

    @property
    def words(self) -> list[str]:
        return shlex.split(self.text.split("|")[0].split(">")[0], comments=True)


def shown_commands() -> list[Shown]:
    """Every line of a shell block that runs ``gpudash`` (a ``\\``-continued line joined), its comment cut."""
    out: list[Shown] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in SHELL_BLOCK.finditer(text):
            first = text[: block.start(1)].count("\n") + 1
            joined = block.group(1).replace("\\\n", " ")
            for k, line in enumerate(joined.splitlines()):
                command = line.strip().removeprefix("$ ")
                if command.startswith("gpudash"):
                    command = re.sub(r"\s+#.*$", "", command)  # the comment after the command
                    out.append(Shown(page.relative_to(ROOT).as_posix(), first + k, command))
    return out


def _subcommand(s: Shown) -> str | None:
    before = s.words[1 : s.words.index("--")] if "--" in s.words else s.words[1:]
    return next((w for w in before if w in SUBCOMMANDS), None)


def _dashboard(s: Shown) -> bool:
    sub = _subcommand(s)
    return (sub in (None, "run") and "--record" not in s.words) or sub == "replay"


def _gpu(s: Shown) -> bool:
    return bool(re.search(r"--device cuda|cuda_graph|-v pipelined|--nproc \d|--nnodes", s.text))


# Why a command is not run here: the first rule that names it.
NOT_HERE: list[tuple[str, Callable[[Shown], bool]]] = [
    ("another machine's recording or rank", lambda s: bool(re.search(r"node[01]\b", s.text))),
    ("a CUDA GPU", _gpu),
    ("a browser (tests/test_serve.py drives gpudash serve)", lambda s: _subcommand(s) == "serve"),
    ("NVML, an NVIDIA driver (tests/test_watch_gpu.py)", lambda s: _subcommand(s) == "watch" and "--once" in s.words),
    ("NVML, an NVIDIA driver, to record", lambda s: _subcommand(s) == "watch" and "--record" in s.words),
    ("a terminal: the dashboard (tests/tui/ drive it)", lambda s: _dashboard(s) or _subcommand(s) == "watch"),
]


def why_not_here(s: Shown) -> str | None:
    return next((why for why, rule in NOT_HERE if rule(s)), None)


COMMANDS = shown_commands()
RUN_HERE = [s for s in COMMANDS if why_not_here(s) is None]


def test_the_pages_commands_are_found_and_each_is_run_or_said_why_not() -> None:
    assert len(COMMANDS) >= 40, [s.text for s in COMMANDS]  # the pages' shell blocks, read
    assert len(RUN_HERE) >= 10, [s.text for s in RUN_HERE]  # a rule that swallows everything is caught
    by_reason = {why: [s.text for s in COMMANDS if why_not_here(s) == why] for why, _ in NOT_HERE}
    assert all(by_reason.values()), by_reason  # every rule names a command the pages show


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the pages assume is there: a training script and a shell script running it, your model's
    file where two pages put it, and a recording."""
    root = tmp_path_factory.mktemp("pasted")
    (root / "train.py").write_text(TRAIN_PY)
    (root / "run.sh").write_text(f"exec {shlex.quote(sys.executable)} train.py\n")
    for where in ("examples", "path/to"):
        (root / where).mkdir(parents=True)
        shutil.copy(ROOT / "examples" / "mine.py", root / where / "mine.py")
    shutil.copy(ROOT / "tests" / "tui" / "data" / "replay.csv", root / "run.csv")
    return root


def _pasted(command: str, cwd: Path) -> subprocess.Popen[str]:
    """``command`` in bash, as typed at a prompt, with this Python's ``gpudash`` and ``python`` first
    on the PATH; in a session of its own, so that a Ctrl-C reaches everything it started, and with
    Ctrl-C's default action, as a terminal gives it (a suite run in the background ignores it)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": checkout_first_on_path(),
    }
    return subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _ends_by_itself(s: Shown) -> bool:
    """``list``, ``report``, and a job (the 400 steps of ``train.py``, also under torchrun)."""
    return _subcommand(s) in ("report", "list") or "--" in s.words


def _sampled(folder: Path, before: set[str]) -> bool:
    """Whether a file the command wrote in ``folder`` (one not in ``before``) holds a sample row:
    a quiet recording's workload runs."""
    for path in folder.iterdir():
        if path.name not in before and path.is_file():
            with open(path, encoding="utf-8", errors="replace") as f:
                if any(line.startswith("sample,") for line in f):
                    return True
    return False


def _runs(proc: subprocess.Popen[str], ready: re.Pattern[str], folder: Path, before: set[str]) -> str:
    """What the command said until a line showed it runs (``ready``), an error, its end, or for a
    quiet one a sample row in a file it wrote in ``folder`` (``before``: the files there before it
    started) or ``QUIET_S`` of silence."""
    assert proc.stderr is not None
    os.set_blocking(proc.stderr.fileno(), False)
    said, deadline, quiet_from = "", time.monotonic() + FIRST_LINE_S, time.monotonic()
    while time.monotonic() < deadline and proc.poll() is None:
        line = proc.stderr.readline()
        if line:
            said, quiet_from = said + line, time.monotonic()
            if ready.search(line) or "gpudash: error:" in line:
                return said
        elif not said and (time.monotonic() - quiet_from >= QUIET_S or _sampled(folder, before)):
            return said
        else:
            time.sleep(0.05)
    return said


@pytest.mark.slow
@pytest.mark.parametrize("shown", RUN_HERE, ids=[f"{s.page}:{s.line}" for s in RUN_HERE])
def test_a_command_the_pages_show_runs_as_written(shown: Shown, workspace: Path, tmp_path: Path) -> None:
    folder = tmp_path / "here"
    shutil.copytree(workspace, folder)
    if _subcommand(shown) != "report":
        (folder / "run.csv").unlink()  # the recording is there to be read; a command that writes one starts afresh
    before = {path.name for path in folder.iterdir()}
    proc = _pasted(shown.text, folder)
    said = ""
    try:
        if _ends_by_itself(shown):
            proc.wait(timeout=FIRST_LINE_S)
        else:
            said = _runs(proc, re.compile("."), folder, before)
            if proc.poll() is None and "gpudash: error:" not in said:  # it runs: stopped as a person stops it
                os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=STOPPED_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.stderr is not None
    os.set_blocking(proc.stderr.fileno(), True)
    said += proc.stderr.read()
    where = f"{shown.page}:{shown.line} `{shown.text}`"
    assert proc.returncode in ((0,) if _ends_by_itself(shown) else (0, 130)), (
        f"{where} exited {proc.returncode}:\n{said}"
    )
    assert "Traceback" not in said and "gpudash: error:" not in said, f"{where}:\n{said}"
