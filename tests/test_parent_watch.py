"""``gpudash.core.parent_watch`` in real processes, what ends every process gpudash started when it is
SIGKILLed (issue 23): the watcher acts when its parent is SIGKILLed, by a pidfd or by polling (said
once, on stderr), and at once when the parent is already gone (the runs themselves:
tests/test_orphans.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.test_orphans import DIE_WITH_PARENT_S, descendants, gone_within, kill_all

# -- gpudash.core.parent_watch, in real processes ----------------------------------------------------------------
WATCHER = """
import os, sys, time
from gpudash.core import parent_watch
if sys.argv[2] == "polling":
    del os.pidfd_open
watch = parent_watch.on_parent_exit(os.getppid(), lambda: (open(sys.argv[1], "w").close(), os._exit(7)))
print(os.getpid(), watch.method, flush=True)
time.sleep(600)  # the main thread is busy: the watcher acts anyway
"""
PARENT = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]])
time.sleep(600)
"""


@pytest.mark.parametrize("how", ["pidfd", "polling"])
def test_the_watcher_acts_when_the_parent_is_sigkilled(tmp_path: Path, how: str) -> None:
    acted = tmp_path / "acted"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, WATCHER, str(acted), how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child: dict[int, str] = {}
    try:
        assert parent.stdout is not None
        pid, method = parent.stdout.readline().split(None, 1)
        child = descendants(parent.pid)
        assert int(pid) in child
        if how == "pidfd":
            assert method.strip() == "pidfd"
        else:
            assert method.strip() == "checking the parent pid every 0.25 s"
        parent.kill()
        parent.wait()
        assert gone_within(child, DIE_WITH_PARENT_S) == []
        assert acted.exists()
        if how == "polling":  # said once, on stderr
            assert parent.stderr is not None
            assert "pidfd_open is not available here" in parent.stderr.read()
    finally:
        parent.kill()
        kill_all(child)


def test_the_watcher_acts_at_once_when_the_parent_is_already_gone() -> None:
    from gpudash.core import parent_watch

    acted = threading.Event()
    parent_watch.on_parent_exit(os.getpid(), acted.set)  # this process is not its own parent: "gone"
    assert acted.wait(DIE_WITH_PARENT_S)
