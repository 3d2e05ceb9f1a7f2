"""The way out of a mistyped command line: the closest flag or command to one that does not exist,
and a job given without the ``--`` before it, written back as it should have been typed.

``explain(parser, argv, message)`` reads argparse's error ``message`` against what was typed
(``argv``, after the program's name) and returns the line to say instead: argparse's own where it
has nothing better.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
import shutil
from collections.abc import Iterator, Sequence

from gpudash.arguments.argparse_adapter import parser_actions, subcommands

JOB_COMMANDS = ("run", "record", "diagnose")  # the commands that take a job after --
_INVALID_CHOICE = re.compile(r"argument (?:COMMAND|command): invalid choice: '([^']*)'")
_UNRECOGNIZED = "unrecognized arguments: "


def explain(parser: argparse.ArgumentParser, argv: Sequence[str] | None, message: str) -> str:
    """The error line for ``message`` about ``argv``: the flag meant, the command meant, or the job
    written after ``--``; argparse's ``message`` where none of them applies."""
    if argv is None:
        return message
    argv = list(argv)
    job = _job_typed(parser, argv, message)  # the job's first word, typed without -- before it
    known = _option_strings(parser)
    ours = argv[: argv.index(job)] if job is not None else argv  # a job's own flags are not ours
    unknown = next((flag for flag in _flags_typed(ours) if not any(k.startswith(flag) for k in known)), None)
    if unknown is not None:
        closest = _closest(unknown, known)
        return f"{unknown} is not an option{f'; did you mean {closest}?' if closest else f' ({parser.prog} --help)'}"
    choice = _INVALID_CHOICE.search(message)
    if choice is not None:
        typed = choice.group(1)
        closest = _closest(typed, _commands(parser))
        if closest is not None:
            return f"'{typed}' is not a command; did you mean '{closest}'?"
        if job is not None:
            return f"'{typed}' is not a command; a job goes after --: {_with_dashes(parser, argv, job)}"
    elif job is not None:
        return f"{message[len(_UNRECOGNIZED) :]}: a job goes after --: {_with_dashes(parser, argv, job)}"
    return message


def _job_typed(parser: argparse.ArgumentParser, argv: list[str], message: str) -> str | None:
    """The first word of a job typed without ``--`` before it: a program where a command was
    expected, or words left over by a command that takes a job."""
    choice = _INVALID_CHOICE.search(message)
    if choice is not None:
        typed = choice.group(1)
        return (
            typed
            if typed in argv and _closest(typed, _commands(parser)) is None and _looks_like_a_program(typed)
            else None
        )
    if message.startswith(_UNRECOGNIZED):
        first = message[len(_UNRECOGNIZED) :].split()[0]
        if not first.startswith("-") and first in argv and _takes_a_job(parser, argv):
            return first
    return None


def _looks_like_a_program(word: str) -> bool:
    return word.endswith(".py") or "/" in word or shutil.which(word) is not None


def _with_dashes(parser: argparse.ArgumentParser, argv: list[str], first: str) -> str:
    """The command line with ``--`` before the job's first word (and ``python`` before a script's)."""
    at = argv.index(first)
    python = ["python"] if first.endswith(".py") else []
    return shlex.join([*parser.prog.split(), *argv[:at], "--", *python, *argv[at:]])


def _takes_a_job(parser: argparse.ArgumentParser, argv: list[str]) -> bool:
    """A job may follow ``--`` on this command line: the dashboard, record or diagnose."""
    commands = _commands(parser)
    if not commands:
        return False
    named = next((word for word in argv if word in commands), None)
    return named is None or named in JOB_COMMANDS


def _flags_typed(argv: list[str]) -> Iterator[str]:
    """The long flags typed (``--name`` of ``--name=value``), before any ``--``."""
    for word in argv:
        if word == "--":
            return
        if word.startswith("--") and len(word) > 2:
            yield word.split("=", 1)[0]


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser and each of its subcommands' parsers."""
    yield parser
    for sub in dict.fromkeys(subcommands(parser).values()):
        yield from _parsers(sub)


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every long flag the command line knows, its subcommands' too."""
    return sorted(
        {flag for p in _parsers(parser) for a in parser_actions(p) for flag in a.option_strings if flag[:2] == "--"}
    )


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    return list(subcommands(parser))


def _closest(word: str, candidates: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return found[0] if found else None
