"""The job's command line, as gpudash's arguments see it: ``gpudash [OPTIONS] -- CMD ...`` split at
the first ``--``, checked before anything starts, and named.

A job's workload is ``job:`` and the script it runs (``job:train.py``, ``job:pkg.train``,
``job:run.sh``); its variant is the script's arguments, so two recordings of one script at two
settings pair up in ``gpudash report a.csv b.csv``. Torch-free.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Sequence

from gpudash.core.protocol import JOB_PREFIX

NO_ARGUMENTS = "(no arguments)"
# the launchers whose own options come before the script (``torchrun --nproc-per-node 2 train.py``)
LAUNCHERS = ("python", "python3", "torchrun", "accelerate", "deepspeed", "bash", "sh", "uv", "poetry")
_SCRIPT = re.compile(r".+\.(py|sh)$")


class JobCommandError(ValueError):
    """A job's command that cannot run: one line for the user."""


def split_job(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """``argv`` split at its first ``--``: gpudash's own arguments, and the job's command (None
    when there is no ``--``)."""
    args = list(argv)
    if "--" not in args:
        return args, None
    i = args.index("--")
    return args[:i], args[i + 1 :]


def check_command(command: Sequence[str]) -> None:
    """Raise JobCommandError unless ``command`` names a program that can be run."""
    if not command:
        raise JobCommandError("nothing after --: give the job's command, e.g. gpudash -- python train.py")
    program = command[0]
    if os.sep in program:
        if not os.path.exists(program):
            raise JobCommandError(f"{program}: no such file")
        if os.path.isdir(program):
            raise JobCommandError(f"{program}: is a directory")
        if not os.access(program, os.X_OK):
            raise JobCommandError(f"{program}: not executable")
    elif shutil.which(program) is None:
        raise JobCommandError(f"{program}: command not found")
    at = script_index(command)  # a script that is not there: said before a launch that would only say so later
    if at is not None and command[at - 1] != "-m" and not os.path.exists(command[at]):
        raise JobCommandError(f"{command[at]}: no such file (the script of {' '.join(command[: at + 1])})")


# ``python -m`` modules that launch the script named after them
LAUNCHER_MODULES = frozenset(
    {"torch.distributed.run", "torch.distributed.launch", "accelerate.commands.launch", "deepspeed.launcher.runner"}
)


def script_index(command: Sequence[str]) -> int | None:
    """Where the job's script (or ``-m`` module) is in ``command``; None when there is none."""
    for i, arg in enumerate(command):
        if i and command[i - 1] == "-m" and arg not in LAUNCHER_MODULES:
            return i
        if _SCRIPT.match(arg) and not arg.startswith("-"):
            return i
    return None


def workload_name(command: Sequence[str]) -> str:
    """``job:`` and the script (its file name), the ``-m`` module, else the program's name."""
    i = script_index(command)
    name = os.path.basename(command[i]) if i is not None else os.path.basename(command[0]) if command else "job"
    return JOB_PREFIX + (_CONTROL.sub(_escaped, name) or "job")


def variant(command: Sequence[str]) -> str:
    """The script's arguments, as a shell would read them, on one line (``(no arguments)`` when none)."""
    i = script_index(command)
    rest = list(command[i + 1 :]) if i is not None else list(command[1:])
    return " ".join(" ".join(_word(w) for w in rest).split()) if rest else NO_ARGUMENTS


def display(command: Sequence[str]) -> str:
    """The command as one line a user could paste; a control character in it (an escape sequence)
    written out, as bash's ``$'…'`` quoting does, never sent to a terminal or a file as it is."""
    return " ".join(_word(w) for w in command)


def short_display(command: Sequence[str], width: int) -> str:
    """``display(command)`` in ``width`` columns, cut from the middle: the program and the script
    by their names (``…/train.py``), then as many of the last arguments as fit after ``…``."""
    whole = display(command)
    if len(whole) <= width or not command:
        return whole
    words = [_word(os.path.basename(command[0]))] + [
        "…/" + _word(os.path.basename(w)) if "/" in w.rstrip("/") and not w.startswith("-") else _word(w)
        for w in command[1:]
    ]
    if len(" ".join(words)) <= width:
        return " ".join(words)
    script = next((i for i, w in enumerate(command) if i > 0 and w.endswith(".py")), None)
    if script is None:
        script = next((i for i, w in enumerate(command) if i > 0 and not w.startswith("-")), 0)
    head = script + 1  # the program to the script, then what fits of the end
    tail: list[str] = []
    for word in reversed(words[head:]):
        if len(" ".join([*words[:head], "…", word, *tail])) > width:
            break
        tail.insert(0, word)
    return " ".join([*words[:head], "…", *tail]) if tail or head < len(words) else " ".join(words[:head])


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def _word(word: str) -> str:
    """One argument as a shell reads it: ``shlex.quote``'s, or ``$'…'`` with its control characters escaped."""
    if not _CONTROL.search(word):
        return shlex.quote(word)
    return "$'" + _CONTROL.sub(_escaped, word.replace("\\", "\\\\").replace("'", "\\'")) + "'"


def is_job(workload: str) -> bool:
    """``workload`` names a job (``job:train.py``), not a family."""
    return workload.startswith(JOB_PREFIX)


def slug(workload: str) -> str:
    """A file-name-safe form of a job's name (for its trace files)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", workload.removeprefix(JOB_PREFIX)) or "job"
