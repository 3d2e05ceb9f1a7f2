"""What ``gpudash sweep`` and ``gpudash tune`` share on the command line: their parser's frame and
the check of their arguments before anything starts (a bad one: one line, exit status 2).
Torch-, Textual- and matplotlib-free."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TypeVar

from gpudash.arguments.argtypes import Parser, UsageError

Plan = TypeVar("Plan")


def command_parser(prog: str, description: str, epilog: str) -> Parser:
    """A subcommand's parser: its description and epilog printed as written."""
    return Parser(
        prog=prog, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def parse_plan(
    argv: list[str], parser: Parser, plan_from_args: Callable[[argparse.Namespace, list[str]], Plan]
) -> tuple[argparse.Namespace, Plan] | None:
    """The arguments and the plan they make; a bad one: its one line on stderr and None (the
    caller exits with ``ExitCode.USAGE``)."""
    args = parser.parse_args(argv)
    try:
        return args, plan_from_args(args, argv)
    except UsageError as exc:
        print(f"gpudash: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return None
