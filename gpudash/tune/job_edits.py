"""The winner of ``gpudash tune -- CMD`` said as an edit of the user's own source.

A DataLoader setting is an edit of the call that made the training DataLoader, at the site the
job's first step named (its construction's first frame outside torch): each argument replaced where
the call gives it, added before its closing parenthesis where it does not. ``cudnn.benchmark`` and
``tf32`` are lines to add after ``import torch`` in the job's script; ``expandable_segments`` an
environment variable set before it. ``autocast=bf16`` wraps the line that called the model in
``with torch.autocast(…)``; ``compile`` adds ``NAME.compile()`` after the optimizer's construction
(both from what the job's first step said: ``forward_at``, ``model_name``, ``optimizer_at``).
``unified_diff`` shows them as a patch of the files, which are never written. Torch-free.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudash.job.settings import Settings

LOADER_KEYS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "batch_size")


@dataclass(frozen=True)
class Edit:
    """Lines ``line``… of ``file`` (1-based) reading ``before``, to read ``after``."""

    file: str
    line: int
    before: str
    after: str

    def as_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "before": self.before, "after": self.after}


def edits(settings: Settings, site: str, command: Sequence[str], job: dict[str, str] | None = None) -> list[Edit]:
    """The edits that make the job as written run with ``settings`` (none that cannot be read);
    ``job``: what its first step said (``forward_at``, ``model_name``, ``optimizer_at``, ``device``)."""
    given, job = dict(settings), job or {}
    out: list[Edit] = []
    loader = {k: v for k, v in settings if k in LOADER_KEYS}
    if loader and site and (e := _loader_edit(site, loader)) is not None:
        out.append(e)
    if given.get("autocast") == "bf16" and (e := _autocast_edit(job)) is not None:
        out.append(e)
    if given.get("compile") == "True" and (e := _compile_edit(job)) is not None:
        out.append(e)
    script = next((arg for arg in command if arg.endswith(".py") and Path(arg).is_file()), None)
    added = []
    if given.get("cudnn_benchmark") == "True":
        added.append("torch.backends.cudnn.benchmark = True")
    if given.get("tf32") == "True":
        added += ["torch.backends.cuda.matmul.allow_tf32 = True", "torch.backends.cudnn.allow_tf32 = True"]
    if given.get("expandable_segments") == "True":
        added.append("os.environ.setdefault('PYTORCH_CUDA_ALLOC_CONF', 'expandable_segments:True')  # before CUDA")
    if added and script is not None and (e := _after_import_torch(script, added)) is not None:
        out.append(e)
    return out


def _loader_edit(site: str, loader: dict[str, str]) -> Edit | None:
    file, _, line = site.rpartition(":")
    try:
        text = Path(file).read_text(encoding="utf-8")
        start = int(line)
    except (OSError, ValueError):
        return None
    lines = text.splitlines(keepends=True)
    if not 1 <= start <= len(lines):
        return None
    offset = sum(len(x) for x in lines[: start - 1])
    opened = text.find("(", offset + text[offset:].find("DataLoader") if "DataLoader" in lines[start - 1] else offset)
    closed = _closing(text, opened)
    if opened < 0 or closed is None:
        return None
    call = text[opened : closed + 1]
    new: str | None = call
    for key, value in loader.items():
        new = _with_argument(new, key, value) if new is not None else None
    if new is None:
        return None  # a call gpudash cannot edit for sure (**kwargs, or not Python it can read)
    end = text.find("\n", closed)
    end = len(text) if end < 0 else end + 1
    before = text[offset:end]
    return Edit(file, start, before, before.replace(call, new, 1))


def _line_at(site: str) -> tuple[str, int, str] | None:
    """(file, line number, its text) at ``site`` (``FILE:LINE``), or None where it cannot be read."""
    file, _, number = site.rpartition(":")
    try:
        lines = Path(file).read_text(encoding="utf-8").splitlines(keepends=True)
        at = int(number)
    except (OSError, ValueError):
        return None
    return (file, at, lines[at - 1]) if 1 <= at <= len(lines) else None


def _autocast_edit(job: dict[str, str]) -> Edit | None:
    """The line that called the model, inside ``with torch.autocast(…)`` (a whole statement only)."""
    found = _line_at(job.get("forward_at", ""))
    if found is None or found[2].count("(") != found[2].count(")") or found[2].rstrip().endswith(("\\", ":")):
        return None
    file, at, text = found
    indent = text[: len(text) - len(text.lstrip())]
    kind = "cuda" if job.get("device", "").startswith("cuda") else "cpu"
    wrapped = f"{indent}with torch.autocast({kind!r}, dtype=torch.bfloat16):\n    {text}"
    return Edit(file, at, text, wrapped)


def _compile_edit(job: dict[str, str]) -> Edit | None:
    """``NAME.compile()`` after the statement that made the optimizer."""
    found, name = _line_at(job.get("optimizer_at", "")), job.get("model_name", "")
    if found is None or not name.isidentifier():
        return None
    file, at, text = found
    if text.count("(") != text.count(")"):
        return None  # a call over several lines: no place said for sure
    indent = text[: len(text) - len(text.lstrip())]
    return Edit(file, at, text, f"{text}{indent}{name}.compile()\n")


def _with_argument(call: str, key: str, value: str) -> str | None:
    """``call`` (its text, parentheses included) with ``key=value``: the keyword's value replaced
    where given (whatever expression it is), a batch size given by position replaced there
    (``DataLoader(dataset, 64, …)``), else added last; None where the call takes ``**kwargs``
    (the argument may be in them) or cannot be read."""
    node = _parsed_call(call)
    if node is None:
        return None
    given = next((k for k in node.keywords if k.arg == key), None)
    target: ast.expr
    if given is not None:
        target = given.value
    elif key == "batch_size" and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
        target = node.args[1]
    elif any(k.arg is None for k in node.keywords):
        return None
    else:
        return _added(call, f"{key}={value}")
    start, end = _span("f" + call, target)
    return call[: start - 1] + value + call[end - 1 :]


def _parsed_call(call: str) -> ast.Call | None:
    try:
        node = ast.parse("f" + call, mode="eval").body
    except SyntaxError:
        return None
    return node if isinstance(node, ast.Call) else None


def _span(source: str, node: ast.expr) -> tuple[int, int]:
    """``node``'s start and end in ``source`` as character offsets (ast counts UTF-8 bytes in a line)."""
    lines = source.splitlines(keepends=True)

    def at(line: int, byte: int | None) -> int:
        text = lines[line - 1]
        return sum(len(x) for x in lines[: line - 1]) + len(text.encode()[: byte or 0].decode(errors="ignore"))

    return at(node.lineno, node.col_offset), at(node.end_lineno or node.lineno, node.end_col_offset)


def _added(call: str, argument: str) -> str:
    """``call`` (its text, parentheses included) with ``argument`` added last, in its layout."""
    body = call[:-1].rstrip()
    tail = call[len(body) : -1]
    comma = "" if body.endswith(",") else ","
    if "\n" not in tail:  # the closing parenthesis right after the last argument
        return f"{body}{comma} {argument})"
    indent = re.search(r"\n([ \t]+)\S[^\n]*$", body)
    return f"{body}{comma}\n{indent.group(1) if indent else '    '}{argument},{tail})"


def _closing(text: str, opened: int) -> int | None:
    """The index of the parenthesis that closes the one at ``opened`` (strings and comments skipped)."""
    if opened < 0:
        return None
    depth, i, quote = 0, opened, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            i = text.find("\n", i)
            if i < 0:
                return None
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _after_import_torch(script: str, added: list[str]) -> Edit | None:
    try:
        lines = Path(script).read_text(encoding="utf-8").splitlines(keepends=True)
    except OSError:
        return None
    at = next((i for i, x in enumerate(lines) if re.match(r"\s*import torch\s*(#.*)?$", x)), None)
    if at is None:
        return None
    first = [a for a in added if a.startswith("os.environ")]
    after = [a for a in added if not a.startswith("os.environ")]
    head = ["import os\n", *(f"{a}\n" for a in first)] if first else []
    return Edit(script, at + 1, lines[at], "".join([*head, lines[at], *(f"{a}\n" for a in after)]))


def unified_diff(found: Sequence[Edit]) -> str:
    """The edits as a unified diff of the files they change (``patch -p1`` from ``/``; never written)."""
    out: list[str] = []
    for file in dict.fromkeys(e.file for e in found):
        text = Path(file).read_text(encoding="utf-8")
        new = text
        for e in (e for e in found if e.file == file):
            new = new.replace(e.before, e.after, 1)
        out += difflib.unified_diff(
            text.splitlines(keepends=True), new.splitlines(keepends=True), f"a{file}", f"b{file}"
        )
    return "".join(out)
