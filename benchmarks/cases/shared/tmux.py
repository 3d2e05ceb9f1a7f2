"""A terminal of its own for the dashboard (``soak_dashboard``): one tmux server on a socket of its
own with one session, its keys sent and its screen read, and a wait for text on that screen."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.soaks import proc_stats


@dataclass
class Tmux:
    """One tmux server (a socket of its own) with one session: the dashboard's terminal."""

    socket: str
    session: str = "dash"

    def run(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=check)
        return out.stdout

    def start(self, command: str, cwd: Path, size: tuple[int, int]) -> int:
        """Start ``command`` in a new session; returns the pid of the process in the pane."""
        pid = self.run(
            "new-session",
            "-d",
            "-P",
            "-F",
            "#{pane_pid}",
            "-s",
            self.session,
            "-c",
            str(cwd),
            "-x",
            str(size[0]),
            "-y",
            str(size[1]),
            command,
        )
        return int(pid.strip())

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.run("send-keys", "-t", self.session, *(["-l"] if literal else []), *keys, check=False)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.session, check=False)

    def kill(self) -> None:
        self.run("kill-server", check=False)


def wait_for(tmux: Tmux, text: str, timeout_s: float, pid: int, header: bool = False) -> str:
    """Until the screen (its first line: ``header``) shows ``text`` (tmux drops trailing blanks);
    SystemExit when the dashboard exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        screen = tmux.screen()
        if text in (screen.partition("\n")[0] if header else screen):
            return screen
        if proc_stats(pid) is None or time.monotonic() > deadline:
            raise RuntimeError(f"soak: no {text!r} on the dashboard's screen; it showed:\n{screen}")
        time.sleep(0.5)
