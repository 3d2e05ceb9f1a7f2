"""Every file a command writes is checked here, before anything starts or is created.

``check_output_file`` is the one checker of a path gpudash will write: a name too long for the
file system, a missing directory, a directory, a FIFO or a device (a FIFO would block the check
itself), a file that exists (unless ``--force``), no permission; ``-`` is standard output, which
must be open and not ``/dev/full``. Each refusal is one ``UsageError`` line.

The files a recording writes must also be distinct: ``--record``, ``--meta`` and ``--log``.
Two names are the same file when they resolve to the same path (symlinks followed) or, for
files that exist, the same inode (hard links, ``/dev/stdout``); ``-`` is standard output,
whatever it points to. Defaults count too: the metadata beside the CSV (``run.json``) and
the workload's log beside it (``run.log``). Torch-free.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass

from gpudash.arguments.argtypes import UsageError
from gpudash.core.textfmt import shown

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_stdout(what: str) -> None:
    """Raise UsageError unless standard output can take a recording: open, and not /dev/full."""
    try:
        st = os.fstat(1)
    except OSError:
        st = None
    if st is None or sys.stdout is None:
        raise UsageError(f"{what} -: standard output is closed; give a file name")
    try:
        full = os.stat("/dev/full")
    except OSError:
        return
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == full.st_rdev:
        raise UsageError(f"{what} -: standard output is /dev/full, where nothing can be written")


def check_output_file(path: str, what: str, *, replace: bool = True) -> None:
    """Raise UsageError (one line) unless ``path`` can be written as a regular file. ``replace``:
    an existing file may be overwritten (else it is refused: give --force); ``-``: stdout."""
    if path == "-":
        check_stdout(what)
        return
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:  # ENAMETOOLONG, ENOTDIR, ELOOP, EACCES
        raise UsageError(f"cannot write {what} {shown(path)}: {exc.strerror or exc}") from None
    if st is not None:
        _check_existing(path, what, st, replace)
        return
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write {shown(path)}: directory {shown(parent)} does not exist")
    try:  # create it and take it away again: the only test that covers every file system's rules
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        raise UsageError(f"cannot write {shown(path)}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        os.unlink(path)
    except OSError:
        pass


def _check_existing(path: str, what: str, st: os.stat_result, replace: bool) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{what} {shown(path)} is a directory")
    kind = next((name for test, name in _KINDS if test(st.st_mode)), None)
    if kind is not None:
        raise UsageError(
            f"{what} {shown(path)} is {kind}, not a regular file: give a file name "
            "('-' writes the CSV to standard output)"
        )
    if not replace:
        named = "" if what.startswith("-") else f"{what} "
        raise UsageError(f"{named}{shown(path)} exists; give --force to overwrite it, or another name")
    if not os.access(path, os.W_OK):
        raise UsageError(f"cannot write {shown(path)}: permission denied")


def _identity(path: str) -> tuple[object, ...]:
    """What a name refers to: an inode when it exists, else its resolved path."""
    try:
        st = os.fstat(1) if path == "-" else os.stat(path)
    except OSError:
        return ("stdout",) if path == "-" else ("path", os.path.realpath(path))
    return ("inode", st.st_dev, st.st_ino)


def check_recording_outputs(record: str, meta: str | None, log: str | None, force: bool) -> None:
    """Check every file a recording writes: distinct, writable; the CSV and its metadata refused
    when they exist (unless ``force``), the log replaced; and the CSV held for this process (a
    second gpudash recording to it meanwhile is refused, ``--force`` or not)."""
    check_distinct_outputs(record, meta, log)
    for output in recording_outputs(record, meta, log):
        check_output_file(output.path, output.what, replace=force or output.role == "log")
    hold_recording(record)


_HELD: dict[bytes, object] = {}  # the sockets that hold this process's recordings, open while it lives


def hold_recording(record: str) -> None:
    """Hold ``record`` for this process: a Unix socket in the abstract namespace (Linux), named by
    the CSV's real path and listening — no file anywhere, and it goes with the process however it
    ends. Held by another process: ``UsageError`` naming it (its pid, from the socket's peer)."""
    import hashlib
    import socket
    import struct

    if record == "-" or not sys.platform.startswith("linux"):
        return
    name = b"\0gpudash-recording-" + hashlib.sha256(os.path.realpath(record).encode()).hexdigest()[:32].encode()
    if name in _HELD:
        return  # this process's already (a second run of the same command, in a test)
    held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        held.bind(name)
        held.listen(1)
    except OSError:
        held.close()
        holder = "?"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(1.0)
                probe.connect(name)
                holder = str(struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0])
        except OSError:
            pass
        busy = f"{shown(record)} is being recorded by another gpudash (pid {holder})"
        raise UsageError(f"{busy}: wait for it to end, or record to another file") from None
    _HELD[name] = held


@dataclass(frozen=True)
class Output:
    """One file of a recording: its role, what it is called, how messages name it, its path."""

    role: str  # "csv", "metadata" or "log"
    what: str  # "--record", "--meta", "the metadata file", "the workload's log"
    name: str  # "--meta run.meta.json", "the metadata file (default: run.json)"
    path: str


def recording_outputs(record: str, meta: str | None, log: str | None) -> list[Output]:
    """Each file a recording to ``record`` writes."""
    from gpudash.recording.headless import default_log_path
    from gpudash.recording.metadata import meta_path_for

    out = [Output("csv", "--record", f"--record {record}", record)]
    named = record != "-" and os.path.basename(os.path.normpath(record)) not in ("", ".", "..")
    if meta:
        out.append(Output("metadata", "--meta", f"--meta {meta}", meta))
    elif named:
        out.append(
            Output(
                "metadata",
                "the metadata file",
                f"the metadata file (default: {meta_path_for(record)})",
                str(meta_path_for(record)),
            )
        )
    if log:
        out.append(Output("log", "--log", f"--log {log}", log))
    elif named and (default_log := default_log_path(record)) is not None:
        out.append(
            Output("log", "the workload's log", f"the workload's log (default: {default_log})", str(default_log))
        )
    return out


def check_distinct_outputs(record: str, meta: str | None, log: str | None) -> None:
    """Raise UsageError (one line) when two of a recording's files are the same file."""
    seen: dict[tuple[object, ...], str] = {}
    for output in recording_outputs(record, meta, log):
        key = _identity(output.path)
        if key in seen:
            raise UsageError(f"{output.name} and {seen[key]} are the same file: give each its own")
        seen[key] = output.name
