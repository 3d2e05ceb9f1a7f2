"""The metadata JSON beside a recording (``run.json``), read as a hostile file.

Torch- and Textual-free. ``read_sidecar`` finds the file, parses it (at most
``MAX_SIDECAR_BYTES``, nested at most ``MAX_DEPTH`` deep, every string stripped of control
characters) and checks every key gpudash writes (its type and range; keys it does not know are
ignored). A file that fails one check is not trusted at all: ``Sidecar.problem`` says why in
one line and ``data`` is empty, so a replay or a report shows what its CSV says and "?" for the
rest. ``gpudash replay`` and ``gpudash report`` both read metadata with it.
``gpu_info_from_metadata`` and ``config_from_metadata`` turn checked metadata into what the
dashboard shows.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudash.core.protocol import GpuInfo, RunConfig
from gpudash.core.textfmt import strip_controls

MAX_SIDECAR_BYTES = 4 << 20  # gpudash writes a few kB; a bigger file is not ours
MAX_DEPTH = 16  # objects and lists in lists: gpudash writes 5 levels (sweep.json's configurations)
UNKNOWN_DEVICE = "?"
# what a replay shows before its rows say what ran, when no (trusted) metadata does: "? / ?"
UNKNOWN_CONFIG = RunConfig(workload="", device=UNKNOWN_DEVICE)


def metadata_path_candidates(csv_path: str | os.PathLike[str]) -> list[Path]:
    """Where a recording's metadata may be: ``run.json``, ``run.csv.json``, ``run.meta.json``."""
    p = Path(csv_path)
    return [p.with_suffix(".json"), Path(str(p) + ".json"), p.with_name(p.stem + ".meta.json")]


# -- checks: each returns None or what is wrong, in words ------------------------------------------
Check = Callable[[Any], "str | None"]


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "true/false",
        type(None): "null",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else f"is {_kind(value)}, not a string"


def _int_from(lo: int, hi: int | None = None) -> Check:
    def check(value: Any) -> str | None:
        if not _is_int(value):
            return f"is {_kind(value)}, not a whole number"
        if value < lo or (hi is not None and value > hi):
            return f"is {value}, outside {lo}..{hi if hi is not None else ''}"
        return None

    return check


def _positive_number(value: Any) -> str | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return f"is {_kind(value)}, not a number"
    if not 0 < value < 1e9:
        return f"is {value}, not a positive number of seconds"
    return None


def _nonnegative_number(value: Any) -> str | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1e12:
        return f"is {value!r}, not a number ≥ 0"
    return None


def _text_list(value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "is not a list of strings"
    return None


def _started(value: Any) -> str | None:
    """An object of strings and whole numbers (its counts are numbers, older files strings), and a
    job's ``settings``: an object of strings."""
    if not isinstance(value, dict):
        return f"is {_kind(value)}, not an object"
    settings = value.get("settings")
    if settings is not None and (
        not isinstance(settings, dict) or not all(isinstance(v, str) for v in settings.values())
    ):
        return "its settings are not an object of strings"
    if not all(
        isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))
        for k, v in value.items()
        if k != "settings"
    ):
        return "is not an object of strings and whole numbers"
    return None


def _object(value: Any) -> str | None:
    return None if isinstance(value, dict) else f"is {_kind(value)}, not an object"


def _device(value: Any) -> str | None:
    from gpudash.arguments.argtypes import device

    if not isinstance(value, str):
        return f"is {_kind(value)}, not a device"
    try:
        device(value)
    except argparse.ArgumentTypeError as exc:
        return str(exc)
    return None


def _catalog(parse: Callable[[Any], Any]) -> Check:
    """A check that a value passes the catalog's own parser (batch size, image size, knobs)."""

    def check(value: Any) -> str | None:
        from workloads.catalog_types import WorkloadError  # torch-free

        try:
            parse(value)
        except WorkloadError as exc:
            return str(exc)
        return None

    return check


def _batch_size(value: Any) -> None:
    from workloads.registry import check_batch_size

    if value != 0:  # 0: a job whose batches were not counted (files before 2026-11-26 say so)
        check_batch_size(value)


def _image_size(value: Any) -> None:
    from workloads.catalog_types import WorkloadError
    from workloads.registry import check_image_size

    if not _is_int(value):
        raise WorkloadError(f"is {_kind(value)}, not a whole number")
    check_image_size(value)


def _knobs(value: Any) -> None:
    from workloads.catalog_types import WorkloadError
    from workloads.knobs import parse_knobs

    if not isinstance(value, str):
        raise WorkloadError(f"is {_kind(value)}, not knob settings")
    parse_knobs(value)


def _family(value: Any) -> str | None:
    from workloads.registry import FAMILIES, is_user_spec  # torch-free

    if not isinstance(value, str):
        return f"is {_kind(value)}, not a workload name"
    if value in FAMILIES or is_user_spec(value) or value.startswith("job:"):  # a file or job of the user's own
        return None
    return f"{value!r} is not a workload ({', '.join(FAMILIES)}, FILE.py:FUNCTION, or job:SCRIPT)"


@dataclass(frozen=True)
class Key:
    """One key gpudash writes: its check, and whether null is allowed."""

    check: Check
    nullable: bool = True


TOP: dict[str, Key] = {
    "gpudash_version": Key(_text),
    "start_time": Key(_text),
    "end_time": Key(_text),
    "hostname": Key(_text),
    "config": Key(_object, nullable=False),
    "gpu_name": Key(_text),
    "gpu_names": Key(_text_list),
    "gpu_index": Key(_int_from(0, 4096)),
    "driver": Key(_text),
    "nvml_unavailable": Key(_text),
    "gpm_unavailable": Key(_text),
    "torch_version": Key(_text),
    "cuda_version": Key(_text),
    "device": Key(_device),
    "device_name": Key(_text),
    "started": Key(_started),
    "csv_columns": Key(_text_list),
    "rows": Key(_int_from(0)),
    "steps": Key(_int_from(0)),
    "exit_code": Key(_int_from(0, 255)),
    "status": Key(_text),
    "child_log": Key(_text),
    "recorded_by": Key(_text),
    "recording_started_at_run_s": Key(_nonnegative_number),
    "running_at_start": Key(_object),
}
CONFIG: dict[str, Key] = {
    "workload": Key(_family, nullable=False),
    "variant": Key(_text),
    "batch_size": Key(_catalog(_batch_size)),
    "device": Key(_device, nullable=False),
    "image_size": Key(_catalog(_image_size)),
    "workers": Key(_int_from(0, 1024)),
    "seed": Key(_int_from(-(2**63), 2**64)),
    "sample_interval_s": Key(_positive_number, nullable=False),
    "gpu_interval_s": Key(_positive_number, nullable=False),
    "max_steps": Key(_int_from(1)),
    "knobs": Key(_catalog(_knobs), nullable=False),
    "trace_dir": Key(_text),
    "job": Key(_text_list),
}


def _check_keys(data: dict[str, Any], keys: dict[str, Key], prefix: str = "") -> str | None:
    for name, key in keys.items():
        if name not in data:
            continue
        value = data[name]
        why = "is null" if value is None and not key.nullable else (None if value is None else key.check(value))
        if why:  # "config.variant is a number, not a string"; "config.batch_size: batch size must be …"
            return f"{prefix}{name}{' ' if why.startswith('is ') else ': '}{why}"
    return None


def check_metadata(data: Any) -> str | None:
    """What is wrong with a recording's metadata (the first problem, one line), or None."""
    if not isinstance(data, dict):
        return f"it is {_kind(data)}, not an object"
    why = _check_keys(data, TOP)
    if why:
        return why
    config = data.get("config")
    if isinstance(config, dict):
        why = _check_keys(config, CONFIG, "config.")
        if why:
            return why
        variant = config.get("variant")
        if isinstance(variant, str):
            from workloads.catalog_types import WorkloadError
            from workloads.registry import FAMILIES

            try:
                known = FAMILIES.get(config.get("workload", RunConfig.workload))
                if known is not None:  # a workload of the user's own has its one variant
                    known.variant(variant)
            except WorkloadError as exc:
                return f"config.variant: {exc}"
    names, index = data.get("gpu_names") or [], data.get("gpu_index")
    if names and index is not None and index >= len(names):
        return f"gpu_index {index} is not one of the {len(names)} GPUs in gpu_names"
    return None


# -- reading ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sidecar:
    """A recording's metadata: ``data`` checked ({} when absent or ignored), ``problem`` why ignored."""

    path: Path | None = None  # the file found (None: none beside the CSV)
    data: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None

    @property
    def note(self) -> str | None:
        """One line for the user when the file was ignored: "run.json ignored: config.variant is 5, …"."""
        if self.problem is None or self.path is None:
            return None
        return strip_controls(f"{self.path.name} ignored: {self.problem}")


def read_sidecar(csv_path: str | os.PathLike[str]) -> Sidecar:
    """The first metadata file beside ``csv_path`` that exists, read and checked."""
    for cand in metadata_path_candidates(csv_path):
        if cand.is_file():
            return _read(cand)
    return Sidecar()


def _read(path: Path) -> Sidecar:
    try:
        if path.stat().st_size > MAX_SIDECAR_BYTES:
            return Sidecar(path, problem=f"larger than {MAX_SIDECAR_BYTES >> 20} MiB")
        with open(path, encoding="utf-8") as f:
            data = _clean(json.load(f))
    except OSError as exc:
        return Sidecar(path, problem=f"cannot be read ({exc.strerror or exc})")
    except UnicodeDecodeError:
        return Sidecar(path, problem="not UTF-8 text")
    except ValueError as exc:  # json.JSONDecodeError
        return Sidecar(path, problem=f"not JSON ({str(exc).splitlines()[0]})")
    except (RecursionError, _TooDeep):  # the parser's own bound, or ours
        return Sidecar(path, problem=f"nested too deeply (more than {MAX_DEPTH} levels)")
    why = check_metadata(data)
    return Sidecar(path, problem=why) if why else Sidecar(path, data)


class _TooDeep(Exception):
    """Metadata nested deeper than ``MAX_DEPTH``."""


def _clean(value: Any, depth: int = 0) -> Any:
    """Parsed JSON with every string (keys too) stripped of control characters; ``_TooDeep``
    when objects and lists nest deeper than ``MAX_DEPTH``."""
    if isinstance(value, str):
        return strip_controls(value)
    if not isinstance(value, (dict, list)):
        return value
    if depth >= MAX_DEPTH:
        raise _TooDeep
    if isinstance(value, dict):
        return {strip_controls(k): _clean(v, depth + 1) for k, v in value.items()}
    return [_clean(v, depth + 1) for v in value]


# -- what the dashboard shows ---------------------------------------------------------------------------
def gpu_info_from_metadata(meta: dict[str, Any], why_none: str = "no metadata file beside the CSV") -> GpuInfo:
    """The GPU a recording ran on (``why_none`` when there is no metadata; what is wrong with
    it when it fails its checks)."""
    if not meta:
        return GpuInfo(available=False, unavailable=why_none)
    problem = check_metadata(meta)
    if problem:
        return GpuInfo(available=False, unavailable=f"metadata ignored: {problem}")
    names = tuple(meta.get("gpu_names") or ())
    name, index = meta.get("gpu_name"), meta.get("gpu_index")
    if not names and name:
        names = (name,)
    if index is None and names:
        index = 0
    if name and index is not None and index < len(names):
        names = names[:index] + (name,) + names[index + 1 :]
    why = meta.get("nvml_unavailable")
    available = bool(names) and not why
    return GpuInfo(
        available=available,
        unavailable=None if available else (why or "NVML was unavailable when recorded"),
        driver=meta.get("driver") or None,
        names=names,
        index=index,
        gpm_unavailable=meta.get("gpm_unavailable") or None,
    )


def config_from_metadata(meta: dict[str, Any]) -> RunConfig:
    """What the recording says it ran; ``UNKNOWN_CONFIG`` when it does not say (or ``meta``
    fails its checks)."""
    if check_metadata(meta):
        return UNKNOWN_CONFIG
    cfg = meta.get("config")
    config = UNKNOWN_CONFIG
    if isinstance(cfg, dict) and cfg.get("workload"):
        kw = {
            k: cfg[k] for k in ("workload", "variant", "batch_size", "device", "knobs") if cfg.get(k) not in (None, "")
        }
        config = RunConfig(**kw)
    if meta.get("device"):  # the device the run really used (the config may say "auto")
        config = dataclasses.replace(config, device=meta["device"])
    return config
