"""The ``gpudash`` command: its entry point and the dispatch to each subcommand's handler
(``gpudash/cli/commands/``): ``run`` (the dashboard, the default), ``record`` (headless; ``gpudash
--record PATH`` is the same), ``diagnose``, ``list``, ``replay``, ``sweep``, ``tune``, ``report``,
``watch`` (every GPU and its processes, no workload) and ``serve`` (the dashboard in a browser);
a job after ``--`` is ``commands.job``'s.

Fast to start: nothing here imports torch or textual at module level. Every argument is
checked before anything starts; a bad one is one line on stderr and exit status 2.

Defaults, lowest first: ``DEFAULTS`` (``gpudash/cli/options.py``, with the option groups), the user's
settings file (``gpudash/arguments/config.py``), then the flags (``gpudash/cli/settings.py``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gpudash.arguments.argparse_adapter import parser_actions
from gpudash.cli.commands.diagnose import diagnose
from gpudash.cli.commands.job import run_job
from gpudash.cli.commands.listing import list_workloads
from gpudash.cli.commands.passthrough import run_passthrough
from gpudash.cli.commands.replay import replay
from gpudash.cli.commands.run import run_or_record
from gpudash.cli.commands.serve import serve_watch
from gpudash.cli.commands.watch import watch
from gpudash.cli.messages import fail, spelled
from gpudash.cli.parsers import PASSTHROUGH, build_parsers
from gpudash.core import faults
from gpudash.core.protocol import ExitCode

HANDLERS: dict[str, Callable[[dict[str, Any]], int]] = {  # the commands that take their options as parsed
    "list": list_workloads,
    "replay": replay,
    "diagnose": diagnose,
    "watch": watch,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpudash`` console script; returns the exit status (130 for a Ctrl-C that
    came before a command took it over: one line, no traceback)."""
    try:
        return dispatch(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        print("gpudash: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except RuntimeError as exc:  # a Ctrl-C that a class's creation wrapped (Python 3.11: "Error calling __set_name__")
        if not isinstance(exc.__cause__, KeyboardInterrupt):
            raise
        print("gpudash: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)


def dispatch(argv: list[str]) -> int:
    """Parse ``argv``, refuse what does not apply to the command named, and run its handler."""
    try:
        faults.from_env()  # test-only (GPUDASH_FAULT): a bad value stops here, before anything starts
    except faults.FaultSpecError as exc:
        return fail(str(exc))
    from gpudash.job.command import split_job

    before, job = split_job(argv)
    named = next((word for word in before if not word.startswith("-")), None)  # the command, if any
    if job is not None and named not in PASSTHROUGH:  # (a recording path named "report" is a path)
        return run_job(before, job)
    top, commands = build_parsers()
    given = vars(top.parse_args(argv))
    command = given.pop("command", None)
    if given.get("job_set"):
        return fail("--set applies to your job (gpudash record PATH --set K=V -- CMD): a family's settings are knobs")
    if command in PASSTHROUGH:
        rest = given.pop("args", [])
        if given:
            return fail(
                f"{spelled(top, list(given))} before '{command}': give {command}'s options after it "
                f"(gpudash {command} --help)"
            )
        return run_passthrough(command, rest)
    if command is not None:
        own = {a.dest for a in parser_actions(commands[command])}
        stray = [dest for dest in given if dest not in own]
        if stray:
            return fail(f"{spelled(top, stray)} does not apply to 'gpudash {command}'")
    if given.get("no_color"):
        os.environ["NO_COLOR"] = "1"  # Textual reads it when the app is built (here, or in serve's child)
    if command in HANDLERS:
        return HANDLERS[command](given)
    if command == "serve" and given.pop("watch", False):
        return serve_watch(given)
    return run_or_record(command or ("record" if "record" in given else "run"), given)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
