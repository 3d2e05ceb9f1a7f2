"""``docs/BENCHMARKS.md``: its sections, one after the other, each written from the results kept in
``docs/bench/`` (``python -m benchmarks page``)."""

from __future__ import annotations

from benchmarks.page.articles import articles_section
from benchmarks.page.beyond import beyond_section
from benchmarks.page.ddp import ddp_section
from benchmarks.page.gpm import gpm_section
from benchmarks.page.job import job_section
from benchmarks.page.sweeps import DOCS
from benchmarks.page.track import track_section
from benchmarks.page.tune import tune_section
from benchmarks.page.vision import vision_section

PAGE = DOCS / "BENCHMARKS.md"
# the page's sections, in order: the articles' tables, then those beyond them
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
