"""``ReplaySource``: a recorded CSV as an ``EngineSource``, for ``gpudash replay``.

Textual-free and torch-free. Without ``follow`` the first ``poll()`` returns the whole file;
with ``follow`` every ``poll()`` returns the rows appended since the last one. A last line
that is still being written (no newline yet, or an open quote) is kept back until it is
complete, so a half-written row is never parsed. Controls make no sense on a recording:
``send()`` raises ``ReadOnlyError``.

Run metadata (GPU, driver, config) comes from the JSON file the recorder writes beside the
CSV, when there is one.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

from gpudash.csvformat import COLUMNS, parse_rows
from gpudash.protocol import Control, GpuInfo, Message, RunConfig, SourceInfo

CHUNK = 1 << 20


class ReadOnlyError(RuntimeError):
    """A control was sent to a replay."""


def metadata_path_candidates(csv_path: str | os.PathLike[str]) -> list[Path]:
    p = Path(csv_path)
    return [p.with_suffix(".json"), Path(str(p) + ".json"), p.with_name(p.stem + ".meta.json")]


def load_metadata(csv_path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON metadata beside a CSV, or {} when there is none (or it is unreadable)."""
    for cand in metadata_path_candidates(csv_path):
        try:
            with open(cand, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    return {}


def _get(d: dict[str, Any], *keys: str) -> Any:
    """The first key present in ``d`` or in its nested dicts ``gpu``/``config``/``nvml``."""
    for k in keys:
        if k in d and d[k] not in (None, ""):
            return d[k]
    for sub in ("gpu", "gpu_info", "nvml", "config"):
        inner = d.get(sub)
        if isinstance(inner, dict):
            v = _get(inner, *keys)
            if v is not None:
                return v
    return None


def gpu_info_from_metadata(meta: dict[str, Any]) -> GpuInfo:
    name = _get(meta, "gpu_name", "gpu", "name")
    names = _get(meta, "names", "gpu_names")
    if isinstance(name, dict):
        name = None
    if isinstance(names, list) and names:
        names_t = tuple(str(n) for n in names)
    elif isinstance(name, str):
        names_t = (name,)
    else:
        names_t = ()
    index = _get(meta, "index", "gpu_index")
    if not isinstance(index, int):
        index = 0 if names_t else None
    if isinstance(name, str) and names_t and index is not None and index < len(names_t):
        names_t = names_t[:index] + (name,) + names_t[index + 1 :]
    driver = _get(meta, "driver", "driver_version")
    why = _get(meta, "nvml_unavailable", "unavailable")
    available = bool(names_t) and not why
    if not meta:
        why = "no metadata file beside the CSV"
    return GpuInfo(
        available=available,
        unavailable=None if available else (str(why) if why else "NVML was unavailable when recorded"),
        driver=str(driver) if driver else None,
        names=names_t,
        index=index,
    )


def config_from_metadata(meta: dict[str, Any]) -> RunConfig:
    cfg = meta.get("config") if isinstance(meta.get("config"), dict) else meta
    kw: dict[str, Any] = {}
    for k in ("workload", "variant", "batch_size", "device"):
        v = cfg.get(k) if isinstance(cfg, dict) else None
        if v not in (None, ""):
            kw[k] = v
    if isinstance(cfg, dict) and isinstance(cfg.get("knobs"), str):
        kw["knobs"] = cfg["knobs"]
    if meta.get("device"):  # the device the run really used (the config may say "auto")
        kw["device"] = str(meta["device"])
    try:
        return RunConfig(**kw)
    except TypeError:
        return RunConfig()


class ReplaySource:
    """Messages of a recorded CSV, read incrementally (``follow``) or all at once."""

    def __init__(self, path: str | os.PathLike[str], follow: bool = False) -> None:
        self.path = str(path)
        self.follow = follow
        self.metadata: dict[str, Any] = {}
        self.config = RunConfig()
        self.gpu_info = GpuInfo(available=False, unavailable="replay not started")
        self._f: io.TextIOWrapper | None = None
        self._fields: list[str] | None = None
        self._pending = ""
        self._eof = False
        self._started = False
        self.rows_read = 0
        self.bad_rows = 0

    # -- EngineSource ---------------------------------------------------------------------------
    @property
    def info(self) -> SourceInfo:
        return SourceInfo(replay=True, path=self.path, follow=self.follow, bad_rows=self.bad_rows)

    def start(self) -> None:
        """Open the file (raises OSError if it cannot be read) and read its metadata."""
        if self._started:
            return
        self._f = open(self.path, encoding="utf-8", newline="")
        self._started = True
        self.metadata = load_metadata(self.path)
        self.gpu_info = gpu_info_from_metadata(self.metadata)
        self.config = config_from_metadata(self.metadata)

    def send(self, control: Control) -> None:
        raise ReadOnlyError("replay is read-only: controls do not apply to a recording")

    def poll(self) -> list[Message]:
        if self._f is None or (self._eof and not self.follow):
            return []
        out: list[Message] = []
        while True:
            chunk = self._f.read(CHUNK)
            if not chunk:
                break
            self._pending += chunk
            out.extend(self._parse_complete())
            if len(chunk) < CHUNK:
                break
        if not self.follow:
            # the whole file is read: a last line without its newline is complete after all
            if self._pending.strip():
                self._pending += "\n"
                out.extend(self._parse_complete())
            self._eof = True
        return out

    @property
    def alive(self) -> bool:
        return self._f is not None and (self.follow or not self._eof)

    def restart(self) -> None:
        raise ReadOnlyError("replay is read-only: nothing to restart")

    def stop(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    # -- parsing --------------------------------------------------------------------------------
    def _parse_complete(self) -> list[Message]:
        cut = self._pending.rfind("\n")
        if cut < 0:
            return []
        done = self._pending[: cut + 1]
        # a newline inside a quoted cell: wait for the rest of the record
        while done.count('"') % 2:
            cut = done.rfind("\n", 0, len(done) - 1)
            if cut < 0:
                return []
            done = done[: cut + 1]
        self._pending = self._pending[len(done) :]
        rows = list(csv.reader(io.StringIO(done)))
        if self._fields is None and rows:
            self._fields = rows.pop(0)
        fields = self._fields or COLUMNS
        dicts = []
        for r in rows:
            if not r:
                continue
            if len(r) != len(fields):
                self.bad_rows += 1
                continue
            dicts.append(dict(zip(fields, r)))
        out: list[Message] = []
        for d in dicts:
            try:
                out.extend(parse_rows([d]))
            except (ValueError, KeyError, TypeError):
                self.bad_rows += 1
                continue
            self.rows_read += 1
        return out
