"""dynamo's own texts for why it recompiled and why it broke a graph, read into a user's words with
what to do about each — the one place that knows their wording (torch 2.4 to 2.14: ``L['x']`` or
``x``, one reason or several, ``Graph Break Reason:`` or ``Graph break:``). Torch-free.

A recompile's reason is the guard that failed: ``tensor 'x' size mismatch at index 0. expected
64, actual 96`` reads ``dim 0 of x: 64 → 96``; ``G['lr'] == 0.001`` reads ``the float lr changed
(was 0.001)``. A graph break's message names its line and its reason: ``Tensor.item()``, a branch
on a tensor's value, a call dynamo cannot trace (``print``, ``time.sleep``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# what a reason is about: each has its fix (``FIXES``)
SHAPE, STRIDE, NUMBER, ITEM, DTYPE, DEVICE, GRAD = "shape", "stride", "number", "item", "dtype", "device", "grad"
MODE, OBJECT, OTHER, RANGE = "mode", "object", "other", "range"
BRANCH, CALL, PRINT, USER = "branch", "call", "print", "user"  # graph breaks' own

FIXES = {
    SHAPE: "mark the changing dimension dynamic (torch._dynamo.mark_dynamic(x, dim) before the call, or "
    "torch.compile(..., dynamic=True)), or pad the inputs to a few bucket lengths",
    STRIDE: "pass the input contiguous (x.contiguous()) so that its strides stay the same",
    NUMBER: "pass the changing number as a tensor (torch.tensor(value)): a Python number is a constant of the graph",
    ITEM: "keep the value a tensor (no .item()/float() inside the compiled code), or set "
    "torch._dynamo.config.capture_scalar_outputs = True",
    DTYPE: "cast the input to one dtype before the call",
    DEVICE: "keep the input on one device, with the same requires_grad, at every call",
    GRAD: "keep the input's requires_grad the same at every call",
    MODE: "keep training and evaluation in separately compiled functions (each mode compiles once)",
    OBJECT: "pass the object that changes as an argument (an attribute or global read inside is guarded by identity)",
    OTHER: "see torch's reason; torch._dynamo.mark_dynamic or dynamic=True where a size changes",
    RANGE: "pad the input to a few bucket lengths inside the range, or mark the dim dynamic over the whole "
    "range it takes (torch._dynamo.mark_dynamic(x, dim, min=…, max=…))",
    BRANCH: "replace the branch on a tensor's value with torch.where (or torch.cond), "
    "or move it out of the compiled code",
    CALL: "move the call out of the compiled code, or wrap it with torch.compiler.disable",
    PRINT: "move the print out of the compiled code (log after the step)",
    USER: "remove the torch._dynamo.graph_break() call where the break is not wanted",
}

_NAME = r"(?P<name>.+?)"  # between the quotes: x, L['x'], args[0]
_TENSOR = re.compile(
    rf"tensor '{_NAME}' (?P<what>size|stride) mismatch at index (?P<dim>\d+)\. expected (?P<a>\d+), actual (?P<b>\d+)"
)
_RANK = re.compile(rf"tensor '{_NAME}' rank mismatch\. expected (?P<a>\d+), actual (?P<b>\d+)")
_DTYPE = re.compile(rf"tensor '{_NAME}' dtype mismatch\. expected (?P<a>\w+), actual (?P<b>\w+)")
_KEYS = re.compile(rf"tensor '{_NAME}' (?:dispatch key set|device) mismatch")
_GRAD = re.compile(rf"tensor '{_NAME}' requires_grad mismatch")
_EQUALS = re.compile(r"^(?P<expr>\S(?:.*?\S)?) == (?P<value>-?[\d.]+(?:e-?\d+)?|True|False)\b")
_STATE = re.compile(r"GLOBAL_STATE changed: (?P<what>[\w ()]+?)\s*$")
_OBJECT = re.compile(r"___check_(?P<check>obj_id|type_id)\((?P<expr>[^,]+),")
_SOURCE = re.compile(r"#\s*(?P<code>.+?)\s*#\s*\S*?:(?P<line>\d+) in \S+(?:\s+\(.*)?\s*$")
_RANGE = re.compile(r"^(?:(?P<lo>-?\d+) <= )?(?P<name>[^\s<=]+?)\.size\(\)\[(?P<dim>\d+)\](?: <= (?P<hi>-?\d+))?$")
MAX_WORDS = 160  # a reason torch gave that gpudash cannot read: at most this much, cut between words
_COMPILE_ID = re.compile(r"^\s*\[?\d+/\d+\]?:\s*")


@dataclass(frozen=True)
class Reason:
    """A recompile's reason in words (``dim 0 of x: 64 → 96``), what it is about (``SHAPE``, …), and
    the guarded line's code where torch names it."""

    words: str
    kind: str
    code: str = ""
    name: str = ""  # the tensor whose dimension changed ...
    dim: int = -1  # ... and which

    @property
    def fix(self) -> str:
        if self.kind == RANGE and self.name and self.dim >= 0 and " went under " in self.words:  # 0/1 specialized
            return (
                f"torch._dynamo.mark_unbacked({self.name}, {self.dim}) before the call, where that size can be 0 or 1"
            )
        if self.kind == RANGE and self.name and self.dim >= 0:
            return (
                f"pad {self.name} to a few bucket lengths inside the range, or mark dim {self.dim} of {self.name} "
                f"dynamic over the whole range it takes (torch._dynamo.mark_dynamic({self.name}, {self.dim}, "
                "min=…, max=…)) before the call"
            )
        if self.kind == SHAPE and self.name and self.dim >= 0:
            return (
                f"mark dim {self.dim} of {self.name} dynamic (torch._dynamo.mark_dynamic({self.name}, {self.dim}) "
                f"before the call, or torch.compile(..., dynamic=True)), or pad {self.name} to a few bucket lengths"
            )
        return FIXES[self.kind]

    @property
    def key(self) -> str:
        """The reason less its values (``dim 0 of x changes``, ``the float lr changed``): recompiles of one cause."""
        if m := re.fullmatch(r"(.+): \S+ → \S+", self.words):
            return f"{m.group(1)} changes"
        return re.sub(r" \(was [^)]*\)$", "", self.words)


@dataclass(frozen=True)
class Break:
    """A graph break: its file and line, its reason in words, what it is about."""

    file: str
    line: int
    words: str
    kind: str

    @property
    def fix(self) -> str:
        return FIXES[self.kind]

    @property
    def where(self) -> str:
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}" if self.file else "?"


def _plain(name: str) -> str:
    """``L['x']`` → ``x``; ``L['self']._modules['fc'].weight`` → ``self.fc.weight``."""
    name = re.sub(r"^[LG]\[['\"]([^'\"]+)['\"]\]", r"\1", name.strip())
    return re.sub(r"\._(?:modules|parameters|buffers)\[['\"]([^'\"]+)['\"]\]", r".\1", name)


def recompile_reason(raw: str) -> Reason:
    """The first failing guard of dynamo's reason (its first line, less its compile id) in words."""
    first = _COMPILE_ID.sub("", (raw or "").strip().split("\n", 1)[0])
    source = _SOURCE.search(first)
    code = source.group("code") if source else ""
    guard = first[: source.start()].strip() if source else first.strip()
    if m := _RANGE.match(guard):
        return _out_of_range(_plain(m["name"]), int(m["dim"]), m["lo"], m["hi"], code)
    if m := _TENSOR.search(guard):
        what, name = ("dim" if m["what"] == "size" else "stride"), _plain(m["name"])
        words = f"{what} {m['dim']} of {name}: {m['a']} → {m['b']}"
        return Reason(words, SHAPE if what == "dim" else STRIDE, code, name, int(m["dim"]))
    if m := _RANK.search(guard):
        return Reason(f"the number of dims of {_plain(m['name'])}: {m['a']} → {m['b']}", SHAPE, code)
    if m := _DTYPE.search(guard):
        return Reason(f"the dtype of {_plain(m['name'])}: {m['a']} → {m['b']}", DTYPE, code)
    if m := _KEYS.search(guard):
        return Reason(f"the device (or dispatch keys) of {_plain(m['name'])} changed", DEVICE, code)
    if m := _GRAD.search(guard):
        return Reason(f"{_plain(m['name'])}'s requires_grad changed", GRAD, code)
    if m := _STATE.search(guard):
        state = m["what"].strip().replace("_", " ")
        return Reason(f"{'grad mode' if state == 'grad mode' else state} changed", MODE, code)
    if m := _EQUALS.search(guard):
        return _value_changed(m["expr"], m["value"], code)
    if m := _OBJECT.search(guard):
        what = "the object" if m["check"] == "obj_id" else "the type of"
        return Reason(f"{what} {_plain(m['expr'])} changed", OBJECT, code)
    return Reason(_cut(guard) or "torch gave no reason", OTHER, code)


def _out_of_range(name: str, dim: int, lo: str | None, hi: str | None, code: str) -> Reason:
    """``2 <= L['idx'].size()[1] <= 319``: a dynamic graph's size left the range it was built for."""
    if hi is not None:
        built = f"{lo} to {hi}" if lo is not None else f"up to {hi}"
        words = f"dim {dim} of {name} went past {hi}, the range the dynamic graph was built for ({built})"
        return Reason(words, RANGE, code, name, dim)
    words = f"dim {dim} of {name} went under {lo}, the range the dynamic graph was built for ({lo} and up)"
    return Reason(words, RANGE, code, name, dim)


def _cut(text: str) -> str:
    """Torch's reason as it is, its comments (``# code # file:line``) left off, at most ``MAX_WORDS``
    characters cut between words (never mid-path)."""
    text = re.split(r"\s+#\s", text, maxsplit=1)[0].strip()
    if len(text) <= MAX_WORDS:
        return text
    return text[: text.rfind(" ", 0, MAX_WORDS)].rstrip(" ,;:") + " …"


def _value_changed(expr: str, value: str, code: str) -> Reason:
    """``G['lr'] == 0.001``: a number the graph took as a constant changed."""
    if expr.startswith("___stack") or expr.startswith("___"):  # a number read off a tensor (a resumed frame's)
        return Reason(f"a number read off a tensor changed (was {value})", ITEM, code)
    name = _plain(expr)
    length = re.fullmatch(r"len\((.+)\)", name)
    if length:
        return Reason(f"the length of {_plain(length.group(1))} changed (was {value})", SHAPE, code)
    kind = "float" if any(c in value for c in ".e") else "bool" if value in ("True", "False") else "int"
    return Reason(f"the {kind} {name} changed (was {value})", NUMBER, code)


_AT = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
_FILE_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_TITLE = re.compile(r"Graph Break Reason: (?P<title>.*)|Graph break: (?P<old>.*?) from user code", re.M)
_GENERIC = "Encountered graph break when attempting to trace"
_NAMED = re.compile(r"`([\w.]+?)\.?`")


def graph_break(raw: str) -> Break:
    """dynamo's graph-break message: where (its first user line named) and why."""
    text = raw or ""
    at = _AT.search(text)
    if at is None:
        frames = list(_FILE_LINE.finditer(text))
        at = frames[-1] if frames else None
    file, line = (at["file"], int(at["line"])) if at else ("", 0)
    title = _title(text)
    said = (ln.strip() for ln in text.split("\n"))
    explanation = next((ln[len("Explanation:") :].strip() for ln in said if ln.startswith("Explanation:")), "")
    return _break_words(file, line, title, explanation)


def _title(text: str) -> str:
    m = _TITLE.search(text)
    if m is None:
        return ""
    if m["old"]:
        return m["old"].strip()
    title = m["title"].strip()
    if title.startswith(_GENERIC):  # the next line says what
        rest = text[m.end() :].split("\n")
        return next((ln.strip() for ln in rest if ln.strip()), title)
    return title


def _break_words(file: str, line: int, title: str, explanation: str) -> Break:
    said = f"{title} {explanation}"
    if re.search(r"\bitem\b|capture_scalar_outputs", said):
        return Break(file, line, "Tensor.item() (a number read off a tensor)", ITEM)
    if "data-dependent" in said.lower() or "data dependent" in said.lower() or "generic_jump" in said:
        return Break(file, line, "a branch on a tensor's value", BRANCH)
    if "graph_break()" in said:
        return Break(file, line, "torch._dynamo.graph_break()", USER)
    named = _NAMED.search(explanation)
    if named and named.group(1) == "print" or "builtin operator `print`" in said:
        return Break(file, line, "print()", PRINT)
    if named:
        return Break(file, line, f"a call dynamo cannot trace: {named.group(1)}", CALL)
    return Break(
        file, line, (title or explanation or "torch gave no reason")[:160], CALL if "call" in said.lower() else OTHER
    )
