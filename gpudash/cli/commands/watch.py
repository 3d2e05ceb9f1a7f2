"""``gpudash watch``: every GPU of the box and its processes, with no workload of gpudash's: the
dashboard, ``--once`` (printed, or ``--json``) or ``--record PATH`` (headless, to CSV)."""

from __future__ import annotations

from typing import Any

from gpudash.arguments.argtypes import UsageError
from gpudash.cli.messages import fail
from gpudash.cli.options import DEFAULTS
from gpudash.cli.settings import themed_user_config
from gpudash.host.gpu_checks import check_gpus
from gpudash.host.gpu_selection import GpuSelectionError, gpu_indexes
from gpudash.recording import paths

WATCH_TUI_ONLY = (("--theme", "theme"),)
WATCH_RECORD_ONLY = (("--duration", "duration"), ("--force", "force"), ("-q/--quiet", "quiet"))


def _refusal(given: dict[str, Any]) -> str | None:
    """Why these options do not go together (None: they do)."""
    once, record = given.get("once", False), given.get("record")
    headless = "--once" if once else ("--record" if record is not None else None)
    if once and record is not None:
        return "--once and --record: give one (--once prints the GPUs once, --record records them)"
    if given.get("json") and not once:
        return "--json only applies with --once"
    stray = [flag for flag, dest in WATCH_RECORD_ONLY if dest in given and record is None]
    if stray:
        return f"{stray[0]} only applies with --record PATH"
    stray = [flag for flag, dest in WATCH_TUI_ONLY if dest in given and headless]
    if stray:
        return f"{stray[0]} is for the dashboard; it does not apply with {headless}"
    return None


def watch(given: dict[str, Any]) -> int:
    """``gpudash watch``: the dashboard over every GPU (``--once``: printed; ``--record``: to CSV)."""
    once, record = given.get("once", False), given.get("record")
    refusal = _refusal(given)
    if refusal is not None:
        return fail(refusal)
    try:
        gpus = gpu_indexes(given["gpus"]) if given.get("gpus") else None
        check_gpus(gpus)  # a GPU this machine lacks: exit 2, as in the dashboard
        if record is not None:
            from gpudash.recording.metadata import meta_path_for

            force = given.get("force", False)
            paths.check_output_file(record, "--record", replace=force)
            if record != "-":
                paths.check_output_file(str(meta_path_for(record)), "the metadata file", replace=force)
    except (UsageError, GpuSelectionError) as exc:
        return fail(str(exc))
    interval = given.get("interval", DEFAULTS["interval"])
    if once:
        from gpudash.watch.once import run_once

        return run_once(gpus, given.get("json", False))
    if record is not None:
        from gpudash.watch.record import run_watch_record

        return run_watch_record(
            record, interval_s=interval, gpus=gpus, duration_s=given.get("duration"), quiet=given.get("quiet", False)
        )
    try:
        user_config = themed_user_config(given.get("theme"))
    except UsageError as exc:
        return fail(str(exc))
    from gpudash.cli.serve import end_with_server
    from gpudash.watch.app import run_watch

    end_with_server()  # a tab of ``gpudash serve --watch``: quit when the server dies
    return run_watch(interval, gpus, user_config)
