"""The job and the terminal, as a shell's job control has them: headless, the job gets the
terminal's foreground while gpudash holds it, and Ctrl-Z suspends the job with gpudash.

The job leads a process group of its own (so that all it starts can be ended together). Left in
the background of the terminal, a job that sets the terminal's modes (``termios.tcsetattr``), or
writes under ``stty tostop``, or reads it, is stopped by SIGTTOU or SIGTTIN and waits for ever. So,
as a shell does for its foreground job, ``JobTerminal.hand_over`` makes the job's group the
terminal's foreground group when gpudash's own is; keys the terminal turns into signals (Ctrl-C,
Ctrl-\\, Ctrl-Z) then reach the job as they would bare.

A job stopped by Ctrl-Z (SIGTSTP) takes gpudash with it: gpudash takes the terminal back and stops
itself, so that the shell sees its job stopped; on ``fg`` it hands the terminal to the job again and
continues it, on ``bg`` it continues it in the background. A SIGTSTP sent to gpudash itself (``kill
-TSTP``, or Ctrl-Z where the job does not hold the terminal) stops the job's groups first. Torch-free.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable, Iterator

STOP_SIGNALS = frozenset({signal.SIGTSTP, signal.SIGSTOP, signal.SIGTTIN, signal.SIGTTOU})
TTY_SIGNALS = frozenset({signal.SIGTTIN, signal.SIGTTOU})  # what a background job gets for touching the terminal


@contextlib.contextmanager
def _ttou_blocked() -> Iterator[None]:
    """SIGTTOU blocked in this thread: ``tcsetpgrp`` from the background changes the foreground
    group instead of stopping gpudash."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class JobTerminal:
    """gpudash's controlling terminal, if it has one: ``hand_over`` its foreground to the job's
    group, ``take_back``, ``close``."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self.job_group: int | None = None  # the group the terminal was handed to

    @classmethod
    def open(cls) -> JobTerminal:
        """The controlling terminal (none: a job of no terminal, under nohup, ssh without -t, CI)."""
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return cls(None)
        return cls(fd)

    def gpudash_in_front(self) -> bool:
        """gpudash's process group is the terminal's foreground group."""
        return self.fd is not None and _foreground(self.fd) == os.getpgrp()

    @property
    def job_in_front(self) -> bool:
        return self.fd is not None and self.job_group is not None and _foreground(self.fd) == self.job_group

    def hand_over(self, job_group: int) -> bool:
        """The terminal's foreground to ``job_group`` when gpudash holds it now; True when handed."""
        if self.fd is None or not self.gpudash_in_front():
            return False
        try:
            with _ttou_blocked():
                os.tcsetpgrp(self.fd, job_group)
        except OSError:
            return False
        self.job_group = job_group
        return True

    def take_back(self) -> None:
        """The foreground back to gpudash's group, where the job's group holds it."""
        if self.fd is None or self.job_group is None:
            return
        with contextlib.suppress(OSError):
            if _foreground(self.fd) == self.job_group:
                with _ttou_blocked():
                    os.tcsetpgrp(self.fd, os.getpgrp())

    def close(self) -> None:
        """The foreground back to gpudash (its job has ended), the terminal's file closed."""
        self.take_back()
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _foreground(fd: int) -> int | None:
    try:
        return os.tcgetpgrp(fd)
    except OSError:
        return None


def stop_state(pid: int) -> tuple[str, int] | None:
    """A change of the job's first process since the last call: ("stopped", the signal) or
    ("continued", SIGCONT); None when none. It does not reap an exit (``waitid`` without
    ``WEXITED``), so ``Popen.poll`` still sees that."""
    try:
        result = os.waitid(os.P_PID, pid, os.WSTOPPED | os.WCONTINUED | os.WNOHANG)
    except (ChildProcessError, OSError):
        return None
    if result is None:
        return None
    if result.si_code == os.CLD_STOPPED:
        return "stopped", result.si_status
    if result.si_code == os.CLD_CONTINUED:
        return "continued", signal.SIGCONT
    return None


def signal_groups(groups: Iterable[int], sig: int) -> None:
    """``sig`` to each group (never gpudash's own), what has gone ignored."""
    for group in groups:
        if group > 1 and group != os.getpgrp():
            with contextlib.suppress(OSError):
                os.killpg(group, sig)


def suspend_with_job(terminal: JobTerminal, groups: list[int]) -> None:
    """The job is stopped (Ctrl-Z): gpudash takes the terminal back and stops too, until its shell
    continues it (``fg``/``bg``); then the job goes on, with the terminal where gpudash has it."""
    signal_groups(groups, signal.SIGTSTP)  # all of the job, not only the group the terminal stopped
    terminal.take_back()
    os.kill(os.getpid(), signal.SIGSTOP)  # here until SIGCONT
    resume_job(terminal, groups)


def resume_job(terminal: JobTerminal, groups: list[int]) -> None:
    """gpudash goes on: the terminal to the job if gpudash is in front (``fg``), and the job continued."""
    if groups:
        terminal.hand_over(groups[0])
    signal_groups(groups, signal.SIGCONT)
