"""The benchmark harness's entry point, ``python -m benchmarks``: ``list`` names every case of the
catalog (each entry with its module, each module with its entry) with the claim it backs and where
the docs make it (and that place exists), ``compare`` sets two results of one case side by side
through gpudash's statistics, ``show`` writes a result out, and ``page`` finds docs/BENCHMARKS.md
current. Each runs as a user runs it (nothing here imports benchmarks/)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
TAGS = {"tiny", "gpu", "multigpu", "probe"}


def bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@cache
def listed() -> list[dict[str, Any]]:
    done = bench("list", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    return list(json.loads(done.stdout))


def headings(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (outside code blocks)."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6}\s+(.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return out


def test_every_case_is_listed_with_its_claim_its_tags_and_its_schedule() -> None:
    cases = listed()
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)) and "engine_overhead" in names and "host_call_cost" in names
    for c in cases:
        assert c["claim"] and c["title"] and c["measures"], c["name"]
        assert set(c["tags"]) <= TAGS, c["name"]
        assert c["schedule"] in ("pairs", "ABBA", "alternating steps", "once"), c["name"]
        assert ("tiny" in c["tags"]) == bool(c["tiny"]), f"{c['name']}: tiny values go with the tiny tag"


@pytest.mark.parametrize("case", [c["name"] for c in listed()])
def test_a_cases_doc_anchor_is_a_heading_of_its_doc(case: str) -> None:
    (anchor,) = [c["anchor"] for c in listed() if c["name"] == case]
    file, _, heading = anchor.partition("#")
    assert (ROOT / file).is_file(), f"{case}: {file} does not exist"
    assert heading in headings(ROOT / file), f"{case}: no heading #{heading} in {file}"


def test_every_catalog_entry_has_its_case_module_and_every_case_module_an_entry() -> None:
    """benchmarks/catalog.toml declares the cases; each entry's code is a module of benchmarks/cases/
    (its own name unless it names another) that defines its measuring function and its parameters'
    class, and no module there is left without an entry."""
    catalog = tomllib.loads((ROOT / "benchmarks" / "catalog.toml").read_text(encoding="utf-8"))
    modules = {p.stem: p for p in (ROOT / "benchmarks" / "cases").glob("*.py") if p.stem != "__init__"}
    for name, entry in catalog.items():
        module = entry.get("module", name)
        assert module in modules, f"{name}: no benchmarks/cases/{module}.py"
        tree = ast.parse(modules[module].read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        code = {entry.get("measure", "measure"), entry.get("params", "Params")}
        assert code <= defined, f"{name}: benchmarks/cases/{module}.py defines no {sorted(code - defined)}"
    named = {entry.get("module", name) for name, entry in catalog.items()}
    assert named == set(modules), f"case modules without a catalog entry: {sorted(set(modules) - named)}"


def test_one_case_is_listed_with_its_parameters() -> None:
    done = bench("list", "host_call_cost")
    assert done.returncode == 0, done.stderr
    assert "claim:" in done.stdout and "blocks (default 120)" in done.stdout and "tiny: device=cpu" in done.stdout


def test_a_case_that_is_none_and_a_parameter_that_is_none_are_refused() -> None:
    done = bench("run", "no_such_case")
    assert done.returncode == 2 and "no case 'no_such_case'" in done.stderr
    done = bench("run", "host_call_cost", "-p", "no_such=1")
    assert done.returncode == 2 and "unknown parameters ['no_such']" in done.stderr
    done = bench("run", "host_call_cost", "-p", "blocks=many")
    assert done.returncode == 2 and "not a int" in done.stderr


def result(values: dict[str, list[float]], figure: float, case: str = "host_call_cost") -> dict[str, Any]:
    """A result as the harness writes one (schema 1): two arms' values and a figure."""
    return {
        "schema": 1,
        "case": case,
        "command": f"python -m benchmarks run {case}",
        "stamp": {"device": "CPU (x86_64, 2 cores)", "torch": "2.14.1", "python": "3.11.7", "date": "2026-11-27"},
        "series": {arm: {"values": v, "unit": "steps/s", "higher_is_better": True} for arm, v in values.items()},
        "figures": {
            "with/bare": {"kind": "comparison", "text": f"with/bare: {figure:.2f}× [0.99–1.01], no change detected"}
        },
        "blocks": [{"kind": "comment", "lines": ["a header"]}, {"kind": "lines", "lines": ["a line", ""]}],
    }


def test_compare_sets_two_runs_side_by_side_with_gpudashs_verdicts(tmp_path: Path) -> None:
    a, b = tmp_path / "a.result.json", tmp_path / "b.result.json"
    a.write_text(json.dumps(result({"bare": [100, 101, 99, 100, 100, 101], "with": [50, 51, 49, 50, 50, 51]}, 1.0)))
    b.write_text(json.dumps(result({"bare": [100, 100, 101, 99, 100, 101], "with": [60, 61, 59, 60, 61, 60]}, 1.01)))
    done = bench("compare", str(a), str(b))
    assert done.returncode == 0, done.stderr
    rows = {line.split(" | ")[0].strip("| "): line for line in done.stdout.splitlines() if line.startswith("| ")}
    assert "no change detected" in rows["bare"], rows["bare"]  # the same arm, the same speed
    assert rows["with"].endswith("| faster |"), rows["with"]  # 20% faster, outside the noise
    assert "1.00× [0.99–1.01], no change detected | 1.01× [0.99–1.01]" in rows["with/bare"]


def test_compare_refuses_two_cases_and_a_result_of_another_schema(tmp_path: Path) -> None:
    a, b = tmp_path / "a.result.json", tmp_path / "b.result.json"
    a.write_text(json.dumps(result({"bare": [1.0, 2.0]}, 1.0)))
    b.write_text(json.dumps(result({"bare": [1.0, 2.0]}, 1.0, case="track_overhead")))
    done = bench("compare", str(a), str(b))
    assert done.returncode == 2 and "two cases" in done.stderr
    b.write_text(json.dumps({**result({}, 1.0), "schema": 99}))
    done = bench("compare", str(a), str(b))
    assert done.returncode == 2 and "schema 99" in done.stderr


def test_show_writes_a_result_as_markdown_with_its_command_and_machine(tmp_path: Path) -> None:
    path = tmp_path / "r.result.json"
    path.write_text(json.dumps(result({}, 1.0)))
    done = bench("show", str(path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "# `python -m benchmarks run host_call_cost`"
    assert lines[1].startswith("# CPU (x86_64, 2 cores) · torch 2.14.1 · python 3.11.7")
    assert lines[2:] == ["# a header", "a line", ""]


def test_the_benchmarks_page_is_what_the_published_results_make() -> None:
    """docs/BENCHMARKS.md is generated from the results' JSON in docs/bench/: a result published
    without the page written again, or a page edited by hand, fails here."""
    done = bench("page", "--check")
    assert done.returncode == 0, done.stderr[-2000:] + "\nrun: python -m benchmarks page"
