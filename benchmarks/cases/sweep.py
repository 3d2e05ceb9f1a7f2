"""A ``gpudash sweep`` run as a result, and published: the sweep's own figures (its summary rows,
its sidecar, its report as the result's document) kept as JSON, and with ``publish`` its
``sweep.csv``, ``sweep.json`` and ``sweep.md`` copied as written into ``docs/bench/NAME/`` and its
plot drawn again from the CSV into ``docs/img/NAME.png``/``.svg`` (``families``: only those).

``args`` runs the sweep (``gpudash sweep ARGS``); ``from_dir`` takes in one already run. The
published sweeps behind docs/BENCHMARKS.md are results of this case
(``docs/bench/NAME/sweep.result.json``: ``python -m benchmarks run sweep -p from_dir=… -p
publish=docs/bench/NAME --out docs/bench/NAME --name sweep``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.cases.shared.gpudash_outputs import copy_outputs, output_folder, take_in
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.stamp import ROOT

DOCS = ROOT / "docs"


@dataclass(frozen=True)
class Params:
    args: tuple[str, ...] = param((), "gpudash sweep's arguments, comma-separated (--preset,all,--device,cuda)")
    from_dir: str | None = param(None, "a sweep already run: its folder (instead of args)")
    publish: str | None = param(None, "copy its files into this folder (docs/bench/NAME) and draw its plot")
    families: tuple[str, ...] = param((), "the plot's families (none: all)")


def publish(folder: Path, dest: Path, families: tuple[str, ...]) -> list[Path]:
    """The sweep's files copied into ``dest`` as written; its plot drawn again as ``docs/img/NAME``."""
    from gpudash.sweep.readback import redraw

    copy_outputs(folder, "sweep", dest)
    img = DOCS / "img"
    img.mkdir(exist_ok=True)
    out = []
    for path in redraw(dest, dest, families or None):
        target = img / f"{dest.name}{path.suffix}"
        path.replace(target)
        out.append(target)
    return out


def measure(run: Run, p: Params) -> None:
    with output_folder("sweep", p.args, p.from_dir) as folder:
        take_in(run, folder, "sweep", ("summary",))
        if p.publish:
            for path in publish(folder, Path(p.publish), p.families):
                run.progress(f"drew {path}")
