"""What gpudash writes for a sweep or a tune run, taken into a result: the run's folder (run now, or
one already run), its CSV's rows as JSON values (a number as a number, an empty cell as null, a
``*_batches`` cell as a list), its JSON sidecar, its Markdown report as the result's document, the
machine it ran on as the result's stamp, and its files copied as written for publishing."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.harness.case import BadParameter
from benchmarks.harness.context import Run
from benchmarks.harness.document import blocks_of
from benchmarks.harness.stamp import ROOT


@contextmanager
def output_folder(command: str, args: tuple[str, ...], from_dir: str | None) -> Iterator[Path]:
    """The folder of a ``gpudash COMMAND ARGS --out FOLDER`` run: ``from_dir``, one already run, or
    (``args``) one run now into a temporary folder, removed afterwards. Exactly one of the two."""
    if (from_dir is None) == (not args):
        raise BadParameter(f"give gpudash {command}'s arguments (-p args=…) or a {command} already run (-p from_dir=…)")
    if from_dir is not None:
        yield Path(from_dir)
        return
    with tempfile.TemporaryDirectory(prefix=f"gpudash-{command}-") as tmp:
        done = subprocess.run([sys.executable, "-m", "gpudash", command, *args, "--out", tmp], cwd=ROOT)
        if done.returncode != 0:
            raise RuntimeError(f"gpudash {command} {' '.join(args)} ended {done.returncode}")
        yield Path(tmp)


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


def copy_outputs(folder: Path, stem: str, dest: Path) -> None:
    """``STEM.csv``, ``STEM.json`` and ``STEM.md`` of ``folder`` copied as written into ``dest``
    (made where missing; nothing to copy where it is ``folder``)."""
    dest.mkdir(parents=True, exist_ok=True)
    if folder.resolve() != dest.resolve():
        for suffix in (".csv", ".json", ".md"):
            shutil.copyfile(folder / f"{stem}{suffix}", dest / f"{stem}{suffix}")
