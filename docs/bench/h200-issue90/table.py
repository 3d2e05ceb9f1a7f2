"""The table of issue 90's GPU runs (``run.sh``): for each run, gpudash's steady rate against the
job's own median step, and its steps at a new shape against the job's own slow steps; the ResNet-50
classifier's FLOPs and MFU, eager and compiled. Usage: ``python table.py OUT_DIR`` (the folder the
run wrote: its ``*.txt`` and ``records.tgz``)."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import tarfile
from pathlib import Path


def job_figures(text: str) -> dict[str, float]:
    (line,) = [x for x in text.splitlines() if x.startswith("JOB ")]
    pairs = (part.split("=", 1) for part in line.split()[1:])
    return {k: float(v) for k, v in pairs if k != "slow_at"}  # (slow_at: each slow step and its time)


def summary_rate(text: str) -> tuple[float, float]:
    m = re.search(r"bs–: steps/s ([\d.]+) ± ([\d.]+) \(95% CI", text)
    assert m is not None, "no summary rate"
    return float(m[1]), float(m[2])


def rows_of(records: Path, name: str) -> list[dict[str, str]]:
    with tarfile.open(records) as tar:
        member = tar.extractfile(f"{name}.csv")
        assert member is not None
        return list(csv.DictReader(io.TextIOWrapper(member)))


def details(rows: list[dict[str, str]], what: str) -> dict[str, str]:
    for row in rows:
        if row["row_kind"] == "event" and row["event_what"] == what:
            return dict(json.loads(row["event_data"])["details"])
    return {}


def _own_shapes(own: dict[str, float]) -> str:
    """The job's own slow steps at a new length ("6, 14.30 s"); all its slow steps where it did not split them."""
    if "shape_steps" in own:
        return f"{own['shape_steps']:.0f}, {own['shape_s']:.2f} s"
    return f"{own['slow_steps']:.0f}, {own['slow_s']:.2f} s (all its slow steps)"


def _others(own: dict[str, float]) -> str:
    return f"{own['slow_steps'] - own['shape_steps']:.0f}" if "shape_steps" in own else "not split"


def main(out: Path) -> None:
    records = out / "records.tgz"
    print(
        "| run | gpudash steps/s (95% CI) | job's own median step → steps/s | ratio "
        "| gpudash's new-shape steps, s with compiles | job's own slow steps at a new length, s "
        "| job's other slow steps |"
    )
    print("|---|---|---|---|---|---|---|")
    for txt in sorted(out.glob("lm-*.txt")):
        name, text = txt.stem, txt.read_text()
        if "JOB " not in text or "95% CI" not in text:
            continue
        own, (rate, half) = job_figures(text), summary_rate(text)
        own_rate = 1e3 / own["median_ms"]
        shapes = details(rows_of(records, name), "shapes") if records.exists() else {}
        whole = float(shapes.get("new_shape_s", 0)) + float(shapes.get("new_shape_phase_s", 0))
        print(
            f"| {name} | {rate:g} ± {half:g} | {own['median_ms']:.3f} ms → {own_rate:.1f} | {rate / own_rate:.3f} | "
            f"{shapes.get('new_shape_steps', '0')}, {whole:.2f} s | {_own_shapes(own)} | {_others(own)} |"
        )
    names = tarfile.open(records).getnames() if records.exists() else []
    mfu: dict[str, float] = {}
    for name in sorted(n.removesuffix(".csv") for n in names if n.startswith("resnet-")):
        rows = rows_of(records, name)
        (summary,) = [r for r in rows if r["row_kind"] == "summary"]
        flops = float(details(rows, "flops").get("flops_per_step", "nan"))
        txt = out / f"{name}.txt"
        own_said = f"{job_figures(txt.read_text())['steps_per_s']:g}" if txt.exists() else "(its output not kept)"
        print(
            f"| {name} | {float(summary['steps_per_s']):.1f} [{float(summary['ci_low']):.1f}–"
            f"{float(summary['ci_high']):.1f}] | own {own_said} steps/s | | {flops / 1e12:.4f} TFLOP a step | "
            f"MFU {float(summary['mfu_pct']):.2f}% |"
        )
        mfu[name] = float(summary["mfu_pct"])
    if {"resnet-compiled", "resnet-eager"} <= mfu.keys():
        print(f"\nThe compiled run's MFU over the eager run's: {mfu['resnet-compiled'] / mfu['resnet-eager']:.3f}×")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
