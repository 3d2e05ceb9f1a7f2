"""``gpudash serve``: the dashboard (or, with ``--watch``, ``gpudash watch``) in a browser, each tab
started with the options given here; the server itself is ``gpudash.cli.serve``'s."""

from __future__ import annotations

import argparse
from typing import Any

from gpudash.arguments.argparse_adapter import parser_actions
from gpudash.arguments.argtypes import UsageError
from gpudash.cli.messages import fail, spelled
from gpudash.cli.parsers import build_parsers
from gpudash.cli.settings import check_theme, user_config, with_defaults
from gpudash.host.gpu_checks import check_gpus
from gpudash.host.gpu_selection import GpuSelectionError, gpu_indexes

WATCH_ONLY = ("once", "json", "record", "duration", "force", "quiet")  # watch's options a browser tab has no use for
SERVING = ("host", "port", "public_url")


def serve_dashboard(args: argparse.Namespace, given: dict[str, Any]) -> int:
    """``gpudash serve``: each browser tab runs ``gpudash run`` with the options given (checked
    already: ``gpudash.cli.commands.run``); ``args``: with their defaults."""
    from gpudash.cli.serve import as_argv, serve

    _, commands = build_parsers()
    return serve(args.host, args.port, args.public_url, as_argv(commands["run"], given))


def serve_watch(given: dict[str, Any]) -> int:
    """``gpudash serve --watch``: each browser tab runs ``gpudash watch`` with the options given
    here (a browser names nothing: no workload, no file)."""
    _, commands = build_parsers()
    own = {a.dest for a in parser_actions(commands["watch"])} - set(WATCH_ONLY)
    stray = [dest for dest in given if dest not in own and dest not in SERVING]
    if stray:
        flags = spelled(commands["serve"], stray)
        return fail(f"{flags} does not apply to 'gpudash serve --watch' (it runs no workload)")
    try:
        check_theme(given.get("theme"))
        if given.get("gpus"):
            check_gpus(gpu_indexes(given["gpus"]))
    except (UsageError, GpuSelectionError) as exc:
        return fail(str(exc))
    from gpudash.cli.serve import as_argv, serve

    args = with_defaults(given, user_config())
    return serve(args.host, args.port, args.public_url, as_argv(commands["watch"], given), command="watch")
