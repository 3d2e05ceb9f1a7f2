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
# ``-c``, and a shell's or Python's flags joined before it (``bash -lc "…"``, ``python -Bc "…"``):
# a command string follows
_COMMAND_STRING_FLAG = re.compile(r"-[A-Za-z]*c")


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
    """Where the job's script (or ``-m`` module) is in ``command``; None when there is none (the
    string of ``bash -c`` or ``python -c`` is a command, not a script)."""
    for i, arg in enumerate(command):
        if i and _COMMAND_STRING_FLAG.fullmatch(command[i - 1]):
            return None
        if i and command[i - 1] == "-m" and arg not in LAUNCHER_MODULES:
            return i
        if _is_script(arg):
            return i
    return None


def _is_script(word: str) -> bool:
    """A ``.py`` or ``.sh`` word that is no option; one holding a space (``my runs/train.py``) only
    where it is a file (``bash -c "python train.py"``'s string is a command)."""
    return (
        word.endswith((".py", ".sh"))
        and not word.startswith("-")
        and (not any(c.isspace() for c in word) or os.path.isfile(word))
    )


def inner_command(command: Sequence[str]) -> list[str]:
    """The command inside ``bash -c "…"`` (``sh -c``, ``python -c``: its words, as the shell splits
    them); [] where there is none, or it does not split."""
    for i, arg in enumerate(command[:-1]):
        if i and _COMMAND_STRING_FLAG.fullmatch(arg):
            try:
                return shlex.split(command[i + 1])
            except ValueError:
                return []
    return []


def workload_name(command: Sequence[str]) -> str:
    """``job:`` and the script (its file name), the ``-m`` module — also of the command a ``bash -c``
    string runs — else the program's name."""
    i = script_index(command)
    if i is None and (inner := inner_command(command)) and (j := script_index(inner)) is not None:
        command, i = inner, j
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


# -- the job on one rank (diagnose's counterfactual: gpudash.diagnosis.checks) ---------------------------
# torchrun's options that place the job on several nodes or a rendezvous: dropped for one rank alone
RDZV_OPTIONS: tuple[str, ...] = (
    "--rdzv-endpoint",
    "--rdzv-backend",
    "--rdzv-id",
    "--rdzv-conf",
    "--master-addr",
    "--master-port",
)
RDZV_OPTIONS += ("--node-rank", "--nnodes", "--max-restarts", "--local-addr")
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")  # python -m torchrun


def one_rank_command(command: Sequence[str], world: int) -> list[str] | str:
    """The job's torchrun command for one rank on this machine alone (``--standalone``), or why
    there is none: not a torchrun command, several nodes, one rank already."""
    cmd = list(command)
    if _launcher_start(cmd) is None:
        return "the job starts its ranks itself (not torchrun): one rank cannot be asked of it from outside"
    at = _launcher_end(cmd)
    if at is None:
        return "torchrun's script (a .py file or -m module) is not found in the command: it is not run on one rank"
    if world <= 1:
        return "the job runs one rank already"
    options, rest = cmd[:at], cmd[at:]
    kept: list[str] = []
    spelled = "--nproc-per-node"  # the job's own spelling (an older torchrun knows only --nproc_per_node)
    i = 0
    while i < len(options):
        word = options[i]
        name, has_value = _option(word)
        if name == "--nnodes" and _nodes(options, i, has_value) not in ("1", "1:1"):
            return "the job spans several nodes: one rank of it is not run from here"
        nproc = name.startswith("--nproc")  # argparse takes an abbreviation (--nproc 2)
        if nproc:
            spelled = "--nproc_per_node" if "_" in word.partition("=")[0] else "--nproc-per-node"
        if nproc or name == "--standalone" or name in RDZV_OPTIONS:
            takes = name != "--standalone" and not has_value
            i += 2 if takes else 1
            continue
        kept.append(word)
        i += 1
    return [*kept, "--standalone", spelled, "1", *rest]


def _launcher_start(cmd: list[str]) -> int | None:
    """Where torchrun's own options begin in ``cmd``; None: not torchrun."""
    for i, word in enumerate(cmd):
        if word.rsplit("/", 1)[-1] == "torchrun" or (word in TORCHRUN_MODULES and i and cmd[i - 1] == "-m"):
            return i + 1
    return None


def _launcher_end(cmd: list[str]) -> int | None:
    """Where torchrun's own options end in ``cmd`` (its script's index); None: no script found."""
    starts = _launcher_start(cmd)
    if starts is None:
        return None
    script = script_index(cmd[starts:])
    if script is None:
        return None
    at = starts + script
    return at - 1 if cmd[at - 1] == "-m" else at  # ``-m pkg.train``: the module's flag is the script's


def _option(word: str) -> tuple[str, bool]:
    """A torchrun option's name in its dashed spelling, and whether its value is in the same word."""
    name, eq, _ = word.partition("=")
    return name.replace("_", "-") if name.startswith("--") else name, bool(eq)


def _nodes(options: list[str], i: int, has_value: bool) -> str:
    if has_value:
        return options[i].partition("=")[2]
    return options[i + 1] if i + 1 < len(options) else ""
