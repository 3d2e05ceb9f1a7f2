"""What an event adds to run.json as it is, typed as JSON (its ``data``): a compiled job's steps at
a new shape (``new_shapes``), the processes that stepped as one rank (``processes``,
``steps_combined``), the out-of-memory error that ended a job (``out_of_memory``). Numbers stay
numbers and lists lists, from the job's message to the recording; the recorder takes them whole.
Torch-free."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class RunFacts:
    """An object of run.json: its keys and JSON values (text, numbers, lists, objects)."""

    KIND: ClassVar[str] = "run_facts"
    values: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"values": self.values}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunFacts:
        """``as_dict``'s object back; TypeError where it is not a JSON object (a hostile file)."""
        values = d["values"]
        if not isinstance(values, dict):
            raise TypeError(f"run facts are an object: {values!r}")
        return cls({str(k): v for k, v in values.items()})

    @classmethod
    def of(cls, values: dict[str, Any]) -> RunFacts:
        """Facts of another process's message: what JSON keeps of it (a value it cannot: its text)."""
        return cls(json.loads(json.dumps(values, default=str)))
