"""What a compile event is about, typed: the ``data`` of a compile, a recompile, a function at the
recompile limit, or a graph break (``compile_intake`` makes them, ``compile_table`` and the
readers take them). A recording keeps it whole (``recording.event_data``). Torch-free."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from gpudash.core.events import Event

_TYPES: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "float": (int, float), "bool": bool}


@dataclass(frozen=True)
class CompileNote:
    """One compile event's facts: the compiled function (a graph break: its line), at which step
    and in how many seconds, and for a recompile or a break its cause in words with the fix."""

    KIND: ClassVar[str] = "compile"
    fn: str = "?"  # the function in words ("forward after line 88"); a graph break: "?"
    file: str = ""
    line: int = 0
    step: int = 0  # the steps read when the hooks sent it
    seconds: float = 0.0
    id: str = ""  # dynamo's compile id ("0/1": frame 0, its second compile)
    reason: str = ""  # a recompile's or a break's cause in words
    cause: str = ""  # the cause's key (the same cause, however its numbers read)
    cause_kind: str = ""  # what the cause is about (shape, value, mode, …)
    fix: str = ""
    raw: str = ""  # dynamo's own words for a recompile (first 300 characters)
    count: int = 0  # a recompile: the function's recompiles so far; a break: times traced at its line
    backward: bool = False  # a lazy backward's compile: its seconds are its forward's compile's
    quiet: bool = False  # not said on record's stderr (counted in the CSV and run.json)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CompileNote:
        """``as_dict``'s object back; TypeError where a field is not of its kind (a hostile file)."""
        kinds = {f.name: str(f.type) for f in fields(cls)}
        for name, value in d.items():
            want: type | tuple[type, ...] = _TYPES[kinds[name]]
            if not isinstance(value, want) or (kinds[name] != "bool" and isinstance(value, bool)):
                raise TypeError(f"a compile note's {name} is not a {kinds[name]}: {value!r}")
        return cls(**d)


def quiet(e: Event) -> bool:
    """The event is counted and not said on record's stderr (a compile event said before)."""
    return isinstance(e.data, CompileNote) and e.data.quiet
