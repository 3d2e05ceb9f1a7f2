"""A ``gpudash tune`` run as a result: its candidates and windows (``tune.csv``), its sidecar
(``tune.json``), its report as the result's document (``tune.md``), and from the report the parts
the page sets against a sweep: where the time went (each part's seconds and share), the loss
check's own timing and the candidates it did not try. ``args`` runs tune; ``from_dir`` takes in one
already run; ``publish`` copies its files as written into ``docs/bench/…``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cases.shared.gpudash_outputs import copy_outputs, output_folder, take_in
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.render import blocks_text
from benchmarks.harness.result import Block

PART = re.compile(r"^- ([a-z ,()]+): ([0-9.]+) s \(([0-9]+%)\)$")  # "- measuring: 37.9 s (25%)"
LOSS_TIMING = re.compile(r"\((the plain copy built and trained in [^)]*)\)")


@dataclass(frozen=True)
class Params:
    args: tuple[str, ...] = param((), "gpudash tune's arguments, comma-separated (-w,resnet50,-b,256,--device,cuda)")
    from_dir: str | None = param(None, "a tune run already done: its folder (instead of args)")
    publish: str | None = param(None, "copy its files into this folder (docs/bench/…)")


def section(blocks: list[Block], heading: str) -> list[str]:
    """The lines of one of the report's sections (``## heading``)."""
    found = False
    lines: list[str] = []
    for b in blocks:
        if b.kind == "heading" and b.level == 2:
            found = b.lines[0] == heading
        elif found and b.kind == "lines":
            lines += b.lines
    return lines


def report_parts(blocks: list[Block]) -> dict[str, Any]:
    """What the page reads of the report: where the time went, the loss check's timing, what was not tried."""
    parts = [m.groups() for line in section(blocks, "Where the time went") if (m := PART.match(line))]
    loss = LOSS_TIMING.search(blocks_text(blocks))
    return {
        "time_parts": [[name, float(seconds), share] for name, seconds, share in parts],
        "loss_check_timing": loss.group(1) if loss else None,
        "not_tried": [line for line in section(blocks, "Not tried") if line.startswith("- ")],
    }


def measure(run: Run, p: Params) -> None:
    with output_folder("tune", p.args, p.from_dir) as folder:
        take_in(run, folder, "tune", ("candidate", "window"))
        run.data.update(report_parts(run.blocks))
        if p.publish:
            copy_outputs(folder, "tune", Path(p.publish))
