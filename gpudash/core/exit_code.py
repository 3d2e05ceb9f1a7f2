"""The exit status of every ``gpudash`` command (docs/usage.md's table is this enum's)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit status of every ``gpudash`` command."""

    OK = 0
    FAILED = 1  # the workload (or writing the recording) failed
    USAGE = 2  # bad arguments or an unreadable file
    INTERRUPTED = 130  # SIGINT or SIGTERM
