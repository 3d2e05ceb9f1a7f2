"""gpudash's end of a job's channel: a Unix datagram socket in a private folder, named to the job
in ``GPUDASH_JOB_CHANNEL``. Each datagram is one JSON object from a process of the job (its hooks,
``gpudash/boot/gpudash_boot/hooks.py``); requests go back to the socket each process named in
its hello. Never blocks: a full socket on either side drops the datagram. Torch-free.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from typing import Any

RECEIVE_BUFFER = 4 << 20  # bytes: a burst of step records from many ranks
MAX_DATAGRAM = 1 << 16
MAX_PER_POLL = 10_000
MAX_DIR = 60  # bytes of the temp dir's path: room for "/gpudash-job-XXXXXXXX/job-PID.sock"


PREFIX = "gpudash-job-"
OWNER = "owner"  # the file in a channel's folder that names the gpudash process that made it


def remove_stale(base: str) -> None:
    """The channel folders in ``base`` of this user's gpudash processes that are gone (killed
    before their reaper could remove them)."""
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        try:
            if not entry.name.startswith(PREFIX) or not entry.is_dir() or entry.stat().st_uid != os.getuid():
                continue
            with open(os.path.join(entry.path, OWNER)) as f:
                owner = int(f.read().strip() or 0)
            if owner > 0:
                os.kill(owner, 0)  # alive (ProcessLookupError when it is gone)
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
        except (OSError, ValueError):
            continue


class HostChannel:
    """Receive the job's messages; send requests to its processes."""

    def __init__(self) -> None:
        # an AF_UNIX path holds 107 bytes: a long TMPDIR gives way to /tmp
        base = tempfile.gettempdir()
        base = base if len(base) <= MAX_DIR else "/tmp"
        remove_stale(base)
        self.folder = tempfile.mkdtemp(prefix=PREFIX, dir=base)
        with open(os.path.join(self.folder, OWNER), "w") as f:
            f.write(str(os.getpid()))
        self.path = os.path.join(self.folder, "host.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setblocking(False)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        except OSError:
            pass

    def receive(self) -> list[dict[str, Any]]:
        """The messages that arrived, oldest first."""
        out: list[dict[str, Any]] = []
        for _ in range(MAX_PER_POLL):
            try:
                data = self.sock.recv(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            try:
                message = json.loads(data)
            except ValueError:
                continue  # not gpudash's hooks: dropped
            if isinstance(message, dict):
                out.append(message)
        return out

    def request(self, path: str, message: dict[str, Any]) -> bool:
        """Send ``message`` to a process of the job (its socket ``path``); False when it could not go."""
        if not path:
            return False
        try:
            self.sock.sendto(json.dumps(message).encode(), path)
        except OSError:
            return False
        return True

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
