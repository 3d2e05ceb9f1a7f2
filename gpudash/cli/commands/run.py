"""``gpudash [run]`` (the dashboard), ``gpudash record PATH`` and ``gpudash --record PATH`` (headless),
on a workload family; ``gpudash serve``'s options are checked here too before it serves."""

from __future__ import annotations

import dataclasses
from typing import Any

from gpudash.arguments.argtypes import UsageError
from gpudash.cli.messages import fail
from gpudash.cli.options import RECORD_ONLY
from gpudash.cli.run_options import config_from_args, recording_options, trace_dir_for
from gpudash.cli.settings import check_theme, user_config, with_defaults, with_theme
from gpudash.recording import paths


def run_or_record(command: str, given: dict[str, Any]) -> int:
    """Check every option, then record headless (a path given), serve (``command`` "serve") or
    run the dashboard; the exit status."""
    record = given.pop("path") if "path" in given else given.get("record")
    if record is None:
        stray = [flag for flag, dest in RECORD_ONLY if dest in given]
        if stray:
            return fail(f"{stray[0]} only applies with --record PATH")
    settings = user_config()
    args = with_defaults(given, settings)
    try:
        config = config_from_args(args)
        if args.trace_every is not None:
            assert record is not None  # --trace-every without --record PATH was refused above
            config = dataclasses.replace(config, trace_dir=trace_dir_for(record))
        if record is not None:
            paths.check_recording_outputs(record, args.meta, args.log, args.force)
        else:
            check_theme(args.theme)
    except UsageError as exc:
        return fail(str(exc))
    if record is not None:
        from gpudash.recording.headless import run_record

        return run_record(config, record, log_path=args.log, **recording_options(args))
    if command == "serve":
        from gpudash.cli.commands.serve import serve_dashboard

        return serve_dashboard(args, given)
    from gpudash.cli.serve import end_with_server
    from gpudash.tui.entry_points import run_dashboard

    end_with_server()  # a tab of ``gpudash serve``: quit (stopping the workload) when the server dies
    return int(run_dashboard(config, with_theme(settings, args.theme)) or 0)
