"""A command in a pseudo-terminal: seconds from exec until a marker (the dashboard's footer) is on
the terminal, then quit as a user quits (``q``) (``tui_frame``, ``replay_first_frame``, ``startup_ab``)."""

from __future__ import annotations

import os
import pty
import select
import struct
import time
from collections.abc import Callable
from pathlib import Path

from gpudash.core.proctree import children

ROOT = Path(__file__).resolve().parents[3]


def _read_until(fd: int, marker: bytes, deadline: float, t0: float) -> float | None:
    """Seconds from ``t0`` until ``marker`` is read from ``fd`` (None: not before ``deadline``)."""
    buf = b""
    while time.perf_counter() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
        if marker in buf:
            return time.perf_counter() - t0
    return None


def _quit(pid: int, fd: int) -> None:
    """``q`` sent as a user sends it; the process waited for, killed after 15 s."""
    try:
        os.write(fd, b"q")
    except OSError:
        pass
    end = time.perf_counter() + 15
    while time.perf_counter() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                if not os.read(fd, 65536):
                    break
            except OSError:
                break
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, 9)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    os.close(fd)


def pty_first_frame(
    argv: list[str],
    marker: bytes,
    timeout: float = 20.0,
    cols: int = 120,
    rows: int = 36,
    after_frame: Callable[[int], str] | None = None,
) -> tuple[float | None, str]:
    """Run ``argv`` in a pty: seconds from exec until ``marker`` appears on the terminal (None: not
    within ``timeout``), and what ``after_frame(pid)`` says then."""
    import fcntl
    import termios

    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.chdir(ROOT)
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    first = _read_until(fd, marker, t0 + timeout, t0)
    note = after_frame(pid) if first is not None and after_frame is not None else ""
    _quit(pid, fd)
    return first, note


def child_torch_state(parent_pid: int) -> str:
    """Whether the workload child of ``parent_pid`` had torch loaded yet (its memory maps)."""
    kids = children(parent_pid)
    for k in kids:
        try:
            maps = Path(f"/proc/{k}/maps").read_text()
        except OSError:
            continue
        if "libtorch" in maps:
            return "torch already loaded in the child"
    return "child still importing torch" if kids else "no child yet"
