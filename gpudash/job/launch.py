"""Starting the user's job, and ending it: its own process group, gpudash's bootstrap first on
its ``PYTHONPATH``, and a reaper that ends the whole group if gpudash dies.

The job leads its own process group, so everything it starts (torchrun's ranks, DataLoader
workers, a shell script's commands) can be ended together. Headless, it gets the terminal's
foreground while gpudash holds it, and gpudash's stdin, as a shell's foreground job does
(``gpudash.job.terminal``): the keys of the terminal (Ctrl-C, Ctrl-Z) reach it as they would bare.
Under the dashboard, whose terminal is Textual's, it runs in a session of its own, without a
terminal (its output captured into a file). The reaper is a tiny Python process of its own session that
reads a pipe only gpudash holds: when gpudash exits, however it exits (SIGKILL included), the
pipe closes and the reaper ends the job's group (SIGTERM, then SIGKILL after 2 s) unless gpudash
told it to leave the job running (``gpudash diagnose --keep-running``). Torch-free.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from gpudash.boot.gpudash_boot import wire
from gpudash.core import procgroup
from gpudash.job.settings import job_env as settings_env
from gpudash.job.terminal import JobTerminal, signal_groups

BOOT_DIR = Path(__file__).resolve().parents[1] / "boot"  # sitecustomize.py and the gpudash_boot package, alone
STOP_GRACE_S = 20.0  # after SIGINT (a job may save a checkpoint), before SIGTERM
TERM_GRACE_S = 5.0  # after SIGTERM, before SIGKILL
CAPTURE_ROOM = 64 << 20  # the free space the captured output's folder needs (the file itself stays below)
REAPER = """
import os, shutil, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
said = sys.stdin.read()
groups = [int(sys.argv[1])] + [int(line.split()[1]) for line in said.splitlines() if line.startswith("group ")]
def alive(group):
    try:
        os.killpg(group, 0)
        return True
    except OSError:
        return False
if "leave" not in said:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for group in groups:
            try:
                os.killpg(group, sig)
            except OSError:
                pass
            try:
                os.killpg(group, signal.SIGCONT)  # a stopped job (Ctrl-Z) gets the signal too
            except OSError:
                pass
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(alive(g) for g in groups):
            time.sleep(0.05)
for line in said.splitlines():  # the run's files: the channel's folder, and the output of a job not left running
    kind, _, path = line.partition(" ")
    if kind == "remove" or (kind == "output" and "leave" not in said):
        try:
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
        except OSError:
            pass
"""


def exit_status(returncode: int) -> int:
    """A process's exit code as a shell gives it (killed by signal N: 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def job_env(
    channel: str,
    base: dict[str, str] | None = None,
    *,
    sites: bool = True,
    unbuffered: bool = False,
    job_set: tuple[tuple[str, str], ...] = (),
    end_after: int | None = None,
) -> dict[str, str]:
    """The job's environment: the bootstrap first on ``PYTHONPATH``, the channel named; its output's
    buffering as the job has it, but where gpudash shows its lines as they come (``unbuffered``:
    the dashboard's pane); the settings ``--set`` applies (``job_set``: ``gpudash.job.settings``);
    ``end_after`` (``--steps``): each process ends at that step, on every rank the same, however
    fast it steps (gpudash's own request, which ends steps of several processes by their sum, comes
    a second's steps late)."""
    env = dict(os.environ if base is None else base)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(BOOT_DIR) + (os.pathsep + path if path else "")
    env[wire.CHANNEL_ENV] = channel
    env[wire.SITES_ENV] = "1" if sites else "0"
    if end_after is not None:
        env[wire.END_AFTER_ENV] = str(end_after)
    if unbuffered:
        env.setdefault("PYTHONUNBUFFERED", "1")  # the pane's lines as they come, not at exit
    env.update(settings_env(job_set, env))
    return env


class JobProcess:
    """The user's command, running: ``start``, ``poll`` (its exit status, None while it runs),
    ``stop`` (SIGINT, then SIGTERM, then SIGKILL), ``leave_running``."""

    def __init__(
        self,
        command: Sequence[str],
        env: dict[str, str],
        *,
        capture: bool = False,
        stdout_to_stderr: bool = False,
        litter: Sequence[str] = (),
    ) -> None:
        self.command = list(command)
        self.litter = list(litter)  # the run's own files (the channel's folder): the reaper removes them
        self.env = env
        self.capture = capture  # the dashboard reads the job's output; headless it passes through
        self.stdout_to_stderr = stdout_to_stderr  # gpudash diagnose: stdout holds the verdict alone
        self.proc: subprocess.Popen[bytes] | None = None
        self._reaper: subprocess.Popen[bytes] | None = None
        self.stopped_by_gpudash = False
        self.on_launch: Callable[[], None] | None = None  # called as soon as the job runs (record's first line)
        self.output_path: str | None = None  # the captured output's file (capture=True)
        self.capture_error: str | None = None  # why the output could not be captured (it runs all the same)
        # process groups of the job's own besides its first (torchrun starts each rank in a session of its own)
        self.groups: list[int] = []
        self.terminal = JobTerminal(None)  # headless: gpudash's terminal, its foreground handed to the job

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Start the job (OSError when its command cannot be run) and its reaper. Captured, its
        stdout and stderr go to a file (``output_path``), not a pipe: a job left running after
        gpudash has gone (``leave_running``) goes on writing there instead of dying of a broken pipe."""
        out: IO[bytes] | int | None = None
        if self.stdout_to_stderr:
            out = sys.stderr.fileno()
        if self.capture:
            out = self._capture_file()
        try:
            self.proc = subprocess.Popen(
                self.command,
                env=self.env,
                stdin=subprocess.DEVNULL if self.capture else None,
                stdout=out,
                stderr=subprocess.STDOUT if self.capture else None,
                process_group=None if self.capture else 0,
                start_new_session=self.capture,  # no terminal: the dashboard's is Textual's
            )
        except OSError:
            self.remove_output()  # it could not be run: no file of its output left behind
            raise
        finally:
            if out is not None and not isinstance(out, int):
                out.close()  # the job holds its own
        if self.on_launch is not None:
            self.on_launch()
        if not self.capture:
            self.terminal = JobTerminal.open()
            self.terminal.hand_over(self.proc.pid)  # a foreground job of gpudash's terminal, as bare
        self._reaper = subprocess.Popen(
            [sys.executable, "-c", REAPER, str(self.proc.pid)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        files = [f"remove {path}" for path in self.litter] + (
            [f"output {self.output_path}"] if self.output_path else []
        )
        if files and self._reaper.stdin is not None:  # removed when gpudash is gone, however it went
            with contextlib.suppress(OSError):
                self._reaper.stdin.write("".join(f"{line}\n" for line in files).encode())
                self._reaper.stdin.flush()

    def _capture_file(self) -> IO[bytes] | int:
        """The file the job's output goes to for the pane; where it cannot be written (no room, no
        folder), none: the job runs all the same, its output not shown, and ``capture_error`` says why."""
        folder = tempfile.gettempdir()
        try:
            room = os.statvfs(folder)
            if room.f_bavail * room.f_frsize < CAPTURE_ROOM:
                raise OSError(errno.ENOSPC, f"{room.f_bavail * room.f_frsize / 2**20:.0f} MiB free")
            fd, self.output_path = tempfile.mkstemp(prefix="gpudash-job-", suffix=".log")
        except OSError as exc:
            why = exc.strerror or str(exc)
            self.capture_error = f"the job's output is not shown: it cannot be written in {folder} ({why})"
            return subprocess.DEVNULL
        return os.fdopen(fd, "ab")

    def poll(self) -> int | None:
        """The job's exit status once it has ended (a shell's: 128 + N when killed by signal N)."""
        if self.proc is None:
            return None
        code = self.proc.poll()
        return None if code is None else exit_status(code)

    def killed_by(self) -> str:
        """The signal that ended the job (``SIGKILL``), or "" when it exited by itself or still runs."""
        return procgroup.signal_name(self.proc.poll() if self.proc is not None else None)

    def add_group(self, pgid: int) -> None:
        """Another process group of the job's (a torchrun rank's session): ended with it, and by
        the reaper if gpudash dies."""
        if self.proc is None or pgid in (self.proc.pid, os.getpgrp()) or pgid <= 1 or pgid in self.groups:
            return
        self.groups.append(pgid)
        reaper = self._reaper
        if reaper is not None and reaper.stdin is not None:
            with contextlib.suppress(OSError):
                reaper.stdin.write(f"group {pgid}\n".encode())
                reaper.stdin.flush()

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """End the job: SIGINT, then SIGTERM after ``grace_s``, then SIGKILL after at most
        ``TERM_GRACE_S`` (0: at once); then whatever of its groups is left. Returns its exit status."""
        proc = self.proc
        if proc is None:
            return None
        groups = [proc.pid, *self.groups]
        if proc.poll() is None:
            self.stopped_by_gpudash = True
            for sig, wait_s in (
                (signal.SIGINT, grace_s),
                (signal.SIGTERM, min(grace_s, TERM_GRACE_S)),
                (signal.SIGKILL, 1.0),
            ):
                for group in groups:
                    procgroup.signal_group(group, sig)
                signal_groups(groups, signal.SIGCONT)  # a stopped job gets it too
                if _waited(proc, wait_s):
                    break
        for group in groups:  # DataLoader workers or ranks left behind
            procgroup.end_group(group, grace_s=1.0)
        self._release_reaper(leave=False)
        self.terminal.close()
        return self.poll()

    def ended_by_itself(self) -> None:
        """The job has exited by itself: what it left running (a helper in its group, a child of a
        session of its own) lives on, as it would bare; the run's own files go."""
        self._release_reaper(leave=True)
        self.terminal.close()

    def remove_output(self) -> None:
        """The captured output's file, once the job is gone and its lines read."""
        if self.output_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.output_path)
            self.output_path = None

    def leave_running(self) -> None:
        """gpudash goes; the job stays (its reaper told to leave it)."""
        self._release_reaper(leave=True)

    def _release_reaper(self, *, leave: bool) -> None:
        reaper, self._reaper = self._reaper, None
        if reaper is None or reaper.stdin is None:
            return
        try:
            if leave:
                reaper.stdin.write(b"leave\n")
            reaper.stdin.close()
        except OSError:
            pass
        try:
            reaper.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            reaper.kill()


def _waited(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True
