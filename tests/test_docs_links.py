"""The documentation's links and citations: every link of README.md and docs/ resolves, to a file
and to a heading's anchor, and no file of the repository cites a path outside it (the tables held to
the code's catalogs: tests/test_docs.py). Fast, and no torch."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_docs import DOCS, README, ROOT, prose_lines

OUTSIDE = "../" + "shared"  # the path beside the checkout that the project once cited (spelt so it is not one)
# Pages other work is writing: a link to one may point nowhere until it lands.
PENDING: set[Path] = set()  # none now


# -- links and citations -------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose_lines(path):
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            s = _slug(m.group(1))
            out.add(f"{s}-{seen[s]}" if s in seen else s)
            seen[s] = seen.get(s, 0) + 1
    return out


PAGES = [README, *sorted(p for p in DOCS.glob("*.md") if p not in PENDING)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_resolve(page: Path) -> None:
    broken = []
    for line in prose_lines(page):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if dest in PENDING and not dest.exists():
                continue
            if not dest.exists():
                broken.append(target)
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(target)
    assert broken == [], f"{page.name}: links that lead nowhere"


SKIP_DIRS = {".git", ".venv", "__pycache__", "node_modules", "build"}


def _repo_text_files() -> Iterator[Path]:
    """The repository's own text files: not the virtual environment, caches or build outputs."""
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [
            d
            for d in dirs
            if d not in SKIP_DIRS and not d.endswith(".egg-info") and (not d.startswith(".") or d == ".ci")
        ]
        for name in files:
            path = Path(folder) / name
            if path.suffix in {".md", ".py", ".toml", ".sh", ".txt", ".cfg", ".json", ""}:
                yield path


def test_nothing_cites_a_path_outside_the_repository() -> None:
    citing = []
    for path in _repo_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if OUTSIDE in text:
            citing.append(path.relative_to(ROOT).as_posix())
    assert citing == [], f"files citing {OUTSIDE}: the repository must stand alone"
