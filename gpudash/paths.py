"""The files a recording writes must be distinct: ``--record``, ``--meta`` and ``--log``.

Two names are the same file when they resolve to the same path (symlinks followed) or, for
files that exist, the same inode (hard links, ``/dev/stdout``); ``-`` is standard output,
whatever it points to. Defaults count too: the metadata beside the CSV (``run.json``) and
the workload's log beside it (``run.log``). Torch-free.
"""

from __future__ import annotations

import os

from gpudash.argtypes import UsageError


def _identity(path: str) -> tuple[object, ...]:
    """What a name refers to: an inode when it exists, else its resolved path."""
    try:
        st = os.fstat(1) if path == "-" else os.stat(path)
    except OSError:
        return ("stdout",) if path == "-" else ("path", os.path.realpath(path))
    return ("inode", st.st_dev, st.st_ino)


def recording_outputs(record: str, meta: str | None, log: str | None) -> list[tuple[str, str]]:
    """(how it is named, path) of each file a recording to ``record`` writes."""
    from gpudash.headless import _default_log_path
    from gpudash.record import meta_path_for

    out = [(f"--record {record}", record)]
    named = record != "-" and os.path.basename(os.path.normpath(record)) not in ("", ".", "..")
    if meta:
        out.append((f"--meta {meta}", meta))
    elif named:
        out.append((f"the metadata file (default: {meta_path_for(record)})", str(meta_path_for(record))))
    if log:
        out.append((f"--log {log}", log))
    elif named and (default_log := _default_log_path(record)) is not None:
        out.append((f"the workload's log (default: {default_log})", str(default_log)))
    return out


def check_distinct_outputs(record: str, meta: str | None, log: str | None) -> None:
    """Raise UsageError (one line) when two of a recording's files are the same file."""
    seen: dict[tuple[object, ...], str] = {}
    for name, path in recording_outputs(record, meta, log):
        key = _identity(path)
        if key in seen:
            raise UsageError(f"{name} and {seen[key]} are the same file: give each its own")
        seen[key] = name
