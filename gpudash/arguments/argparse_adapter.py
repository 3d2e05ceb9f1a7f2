"""argparse's private list of a parser's actions, in one place (an adapter allowed by
tests/test_private_apis.py).

argparse has no public way to list what a parser reads: ``ArgumentParser._actions`` is the only
list of its options and positionals (a public accessor is asked for in python/cpython#144932,
open). The ``gpudash`` command needs it to name an option as the user spells it, to write the
options it was given back as flags (``serve`` starting ``gpudash run``) and to tell which options
a subcommand reads. The actions themselves (``dest``, ``option_strings``, ``nargs``) are public.
Likewise a parser's subcommands: ``argparse._SubParsersAction`` is the only type that tells the
action holding them (their names and parsers, ``choices``) from the others.
"""

from __future__ import annotations

import argparse


def parser_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every action ``parser`` reads (options, positionals, ``-h``), in the order they were added."""
    return list(parser._actions)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``parser``'s subcommands by name (an alias names its command's parser again)."""
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }
