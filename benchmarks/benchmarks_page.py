"""Write ``docs/BENCHMARKS.md`` from the published sweeps in ``docs/bench/`` (see
``benchmarks/publish_sweeps.py``). Every gpudash figure on the page is read from those CSVs or
copied from their ``sweep.md``; the comparisons between two variants that the sweep did not
make itself (each against the one before) are ``gpudash.stats.comparison.compare`` over the batch
means the CSV carries. The articles' figures are quoted from ``docs/workloads.md``.

    python benchmarks/benchmarks_page.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.page_sections.articles import articles_section  # noqa: E402
from benchmarks.page_sections.beyond import beyond_section  # noqa: E402
from benchmarks.page_sections.ddp import ddp_section  # noqa: E402
from benchmarks.page_sections.gpm import gpm_section  # noqa: E402
from benchmarks.page_sections.job import job_section  # noqa: E402
from benchmarks.page_sections.sweeps import DOCS  # noqa: E402
from benchmarks.page_sections.track import track_section  # noqa: E402
from benchmarks.page_sections.tune import tune_section  # noqa: E402
from benchmarks.page_sections.vision import vision_section  # noqa: E402

# the page's sections, in order: the articles' tables, then those beyond them (``benchmarks/page_sections/``)
SECTIONS = (
    articles_section,
    beyond_section,
    tune_section,
    vision_section,
    track_section,
    job_section,
    gpm_section,
    ddp_section,
)


def page() -> str:
    """The whole page: its sections, one after the other."""
    return "\n".join(section() for section in SECTIONS)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    (DOCS / "BENCHMARKS.md").write_text(page())
    print(DOCS / "BENCHMARKS.md")


if __name__ == "__main__":
    main()
