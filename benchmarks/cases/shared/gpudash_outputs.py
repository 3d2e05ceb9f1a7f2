"""What gpudash writes for a sweep or a tune run, taken into a result: its CSV's rows as JSON values
(a number as a number, an empty cell as null, a ``*_batches`` cell as a list), its JSON sidecar,
its Markdown report as the result's document, and the machine it ran on as the result's stamp."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from benchmarks.harness.context import Run
from benchmarks.harness.document import blocks_of


def value(cell: str) -> Any:
    """A CSV cell as a JSON value: null when empty, an int or a float where it is one, else the text."""
    if cell == "":
        return None
    for kind in (int, float):
        try:
            return kind(cell)
        except ValueError:
            continue
    return cell


def rows(path: Path, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows of ``path`` whose ``row_kind`` is one of ``kinds``, each cell a JSON value."""
    with open(path, newline="") as f:
        return [
            {k: [float(b) for b in v.split(";") if b] if k.endswith("_batches") else value(v) for k, v in r.items()}
            for r in csv.DictReader(f)
            if r["row_kind"] in kinds
        ]


def machine_stamp(meta: dict[str, Any]) -> dict[str, Any]:
    """The stamp of a run measured by gpudash elsewhere: the machine its sidecar names."""
    return {
        "device": meta.get("gpu_name") or meta.get("device_name") or meta.get("device"),
        "torch": meta.get("torch_version"),
        "cuda": meta.get("cuda_version"),
        "python": meta.get("python_version"),
        "commit": meta.get("gpudash_version"),
        "date": meta.get("start_time"),
        "host": meta.get("hostname"),
        "cpus": meta.get("cpu_count"),
        "host_load": None,
    }


def take_in(run: Run, folder: Path, stem: str, kinds: tuple[str, ...]) -> dict[str, Any]:
    """``STEM.csv``'s rows of ``kinds``, ``STEM.json`` and ``STEM.md`` of ``folder`` into ``run``:
    the rows and the sidecar as its data, the report as its document, the sidecar's machine as its stamp."""
    meta = json.loads((folder / f"{stem}.json").read_text())
    run.data["meta"] = meta
    run.data["rows"] = rows(folder / f"{stem}.csv", kinds)
    run.blocks.extend(blocks_of((folder / f"{stem}.md").read_text(encoding="utf-8"), markdown=True))
    run.stamp = machine_stamp(meta)
    return meta
