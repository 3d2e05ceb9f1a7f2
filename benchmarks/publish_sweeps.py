"""Copy finished sweeps into ``docs/bench/NAME/`` and draw their plots into ``docs/img/``.

    python benchmarks/publish_sweeps.py NAME=SWEEP_DIR[:family,family] ...

Each sweep's ``sweep.csv``, ``sweep.json`` and ``sweep.md`` are copied as written (the figures
are the sweep's, never edited); the plot is drawn again from the CSV with the current code
(``gpudash.sweep.readback.redraw``), limited to the families named after the colon. Prints one
line per plot.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpudash.sweep.readback import redraw  # noqa: E402

DOCS = ROOT / "docs"


def publish(name: str, sweep_dir: Path, families: tuple[str, ...] | None) -> list[Path]:
    """Copy one sweep's files and draw its plot as ``docs/img/NAME.png``/``.svg``."""
    dest = DOCS / "bench" / name
    dest.mkdir(parents=True, exist_ok=True)
    for file in ("sweep.csv", "sweep.json", "sweep.md"):
        shutil.copyfile(sweep_dir / file, dest / file)
    drawn = redraw(dest, dest, families)
    img = DOCS / "img"
    img.mkdir(exist_ok=True)
    out = []
    for path in drawn:
        target = img / f"{name}{path.suffix}"
        path.replace(target)
        out.append(target)
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweeps", nargs="+", metavar="NAME=SWEEP_DIR[:family,family]")
    for arg in p.parse_args(argv).sweeps:
        name, _, rest = arg.partition("=")
        where, _, fams = rest.partition(":")
        for path in publish(name, Path(where), tuple(fams.split(",")) if fams else None):
            print(path.relative_to(DOCS.parent))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
