"""What a run's "started" event says of it beside its configuration (``Event.running``), typed (its
``data``): torch, CUDA, the process and its GPU; a reference workload's image size and loader
workers; a job's optimizer, how its steps are counted, its command line and its settings
(``core.job_settings``). The engine's child, the job's session and ``gpudash.track`` make it; run.json's
``started`` and the recordings read it whole, and the details' text is made from it for a person
reading the CSV. Torch-free."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from gpudash.core.job_settings import settings_of

_WHOLE = ("pid", "image_size", "workers", "nnodes")  # whole numbers (None: not said)


@dataclass(frozen=True)
class StartNote:
    """One run's start. A field left None is not said (a job has no image size, a family no command)."""

    KIND: ClassVar[str] = "start"
    torch: str = ""
    cuda: str = ""  # "" on a CPU build
    pid: int | None = None
    device_name: str | None = None  # the GPU's name (None: not on a GPU)
    gpu_uuid: str | None = None  # the GPU the process uses, for NVML to watch it
    image_size: int | None = None  # a reference workload's
    workers: int | None = None  # a reference workload's DataLoader workers
    nnodes: int | None = None  # a data-parallel reference run's nodes
    optimizer: str | None = None  # a job's optimizer class ("" where it has none)
    steps: str | None = None  # a job's: how its steps are counted, in words
    command: str | None = None  # a job's command line, as shown
    settings: dict[str, str] = field(default_factory=dict)  # a job's own settings (``core.job_settings``)

    def said(self) -> dict[str, Any]:
        """The fields said, typed (run.json's ``started`` beside the configuration; ``settings`` as an
        object, where there are any)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "settings"}
        out = {k: v for k, v in out.items() if v is not None}
        if self.settings:
            out["settings"] = dict(self.settings)
        return out

    def details(self) -> dict[str, str]:
        """The text form the event's details carry (the CSV's reader by eye); settings left out."""
        return {k: str(v) for k, v in self.said().items() if k != "settings"}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StartNote:
        """``as_dict``'s object back; TypeError where a field is not of its kind (a hostile file)."""
        names = {f.name for f in fields(cls)} - {"settings"}
        values = {k: d[k] for k in names if d.get(k) is not None}
        for k, v in values.items():
            whole = isinstance(v, int) and not isinstance(v, bool)
            if (k in _WHOLE and not whole) or (k not in _WHOLE and not isinstance(v, str)):
                raise TypeError(f"a start's {k} is {'a whole number' if k in _WHOLE else 'text'}: {v!r}")
        return cls(**values, settings=settings_of(d.get("settings")))

    @classmethod
    def of_settings(cls, d: dict[str, Any]) -> StartNote:
        """An older recording's started data (its job's settings alone, kind ``job_settings``)."""
        return cls(settings=settings_of(d.get("values")))
