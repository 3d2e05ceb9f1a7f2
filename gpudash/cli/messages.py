"""The command line's own lines on stderr: an error (exit status 2), a warning, and options named
as the user spells them. Torch- and Textual-free."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpudash.arguments.argparse_adapter import parser_actions
from gpudash.core.protocol import ExitCode


def fail(message: str) -> int:
    """One ``gpudash: error:`` line (control characters from a name given are not passed on);
    returns the exit status of bad arguments."""
    from gpudash.core.textfmt import strip_controls

    print(f"gpudash: error: {strip_controls(' '.join(message.split()))}", file=sys.stderr)
    return ExitCode.USAGE


def warn(message: str) -> None:
    """One ``gpudash: warning:`` line."""
    print(f"gpudash: warning: {' '.join(message.split())}", file=sys.stderr, flush=True)


def spelled(parser: argparse.ArgumentParser, dests: Sequence[str]) -> str:
    """How the user spells these options: "-w/--workload, --theme"."""
    flags = {a.dest: "/".join(a.option_strings) or a.dest for a in parser_actions(parser)}
    return ", ".join(flags.get(d, d) for d in dests)
