"""How a case runs gpudash and reads what it writes, the one way every case does: ``gpudash_argv`` and
``run_gpudash`` (this Python's gpudash, from the checkout; a failure one error naming the command),
a CSV's rows as JSON values (a number as a number, an empty cell as null, a ``*_batches`` cell as a
list), the JSON sidecar beside it; and for a sweep or a tune run, its folder (run now, or one
already run) taken into a result: its Markdown report as the result's document, the machine it ran
on as the result's stamp, and its files copied as written for publishing."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.harness.case import BadParameter
from benchmarks.harness.context import Run
from benchmarks.harness.document import blocks_of
from benchmarks.harness.stamp import ROOT


def gpudash_argv(*args: str) -> list[str]:
    """The command line of ``gpudash ARGS`` as a case runs it: this Python, the checkout's gpudash."""
    return [sys.executable, "-m", "gpudash", *args]


def run_gpudash(
    *args: str,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | str = ROOT,
    prefix: Sequence[str] = (),
    check: bool = True,
    capture: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``gpudash ARGS`` run to its end (after ``prefix``: ``taskset …``), its output captured as text
    (``capture``; else on the terminal, for a long run's progress); with ``check``, an exit other than 0
    is a RuntimeError with the command and its stderr's last lines."""
    argv = [*prefix, *gpudash_argv(*args)]
    done = subprocess.run(argv, capture_output=capture, text=True, timeout=timeout, env=env, cwd=cwd)
    if check and done.returncode != 0:
        tail = "\n".join((done.stderr or "").strip().splitlines()[-8:])
        raise RuntimeError(f"{' '.join(argv)} ended {done.returncode}:\n{tail}")
    return done


def sidecar(csv_path: Path) -> dict[str, Any]:
    """The JSON gpudash wrote beside a CSV (``run.csv`` → ``run.json``); {} where it wrote none."""
    path = csv_path.with_suffix(".json")
    return json.loads(path.read_text()) if path.exists() else {}


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
        run_gpudash(command, *args, "--out", tmp, capture=False)  # (its progress on the terminal)
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


def text_rows(path: Path) -> list[dict[str, str]]:
    """Every row of the CSV at ``path``, each cell as its text (for a case that writes them back)."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def rows(path: Path, kinds: tuple[str, ...] = ("sample",)) -> list[dict[str, Any]]:
    """The rows of ``path`` whose ``row_kind`` is one of ``kinds``, each cell a JSON value."""
    return [
        {k: [float(b) for b in v.split(";") if b] if k.endswith("_batches") else value(v) for k, v in r.items()}
        for r in text_rows(path)
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
    meta = sidecar(folder / f"{stem}.csv")
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
