"""The documentation restates the code's catalogs; these tests hold each table to its catalog.

Every table of README.md and docs/ that lists what a catalog holds — the dashboard's keys
(``gpudash/tui/actions.py``), the knobs (``workloads/knobs.py``), the variants and their defaults
(``workloads/registry.py``), the fault kinds (``gpudash/core/faults.py``), the CSV's columns
(``gpudash/recording/csvformat.py``), the verdicts, the exit statuses, the benchmark scripts and the layer
picture's floors (the imports) — is checked here both ways: the doc lists nothing the code lacks
and lacks nothing the code has. Also: the README stays a first contact (at most 8 KB) and its test
command is the one CI runs (every link between the pages resolves, and nothing cites a path outside
the repository: tests/test_docs_links.py). Fast, and no torch (the catalogs are torch-free).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from gpudash.core.faults import FORMS
from gpudash.core.protocol import EventKind, ExitCode
from gpudash.recording.csvformat import ROW_KINDS, header
from gpudash.stats.comparison import Verdict
from gpudash.tui.actions import ACTIONS
from workloads.knobs import KNOBS
from workloads.registry import FAMILIES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_LIMIT = 8192  # bytes: a first contact, not the manual (issue 24)
# Textual's key names as the docs print them.
KEY_SHOWN = {"plus": "+", "equals_sign": "=", "minus": "-", "question_mark": "?"}
# Keys in the docs' key tables that are not Action rows: Textual's own command palette.
NOT_ACTIONS = {frozenset({"ctrl+p"})}


# -- reading Markdown --------------------------------------------------------------------------


def prose_lines(path: Path) -> Iterator[str]:
    """The lines of a Markdown file outside fenced code blocks."""
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def _cells(line: str) -> list[str]:
    """A table row's cells; a ``|`` inside backticks does not split."""
    cells, cell, code = [], "", False
    for ch in line.strip().strip("|"):
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += ch
    cells.append(cell.strip())
    return cells


def table(path: Path, header: str) -> list[list[str]]:
    """The rows of the one table in ``path`` whose header row starts with the cells ``header``
    (``"key | action"``), without the header and the rule."""
    want = [c.strip() for c in header.split("|")]
    found: list[list[list[str]]] = []
    rows: list[list[str]] | None = None
    for line in prose_lines(path):
        if not line.lstrip().startswith("|"):
            rows = None
            continue
        cells = _cells(line)
        if rows is None:
            rows = []
            if cells[: len(want)] == want:
                found.append(rows)
            continue
        if not set("".join(cells)) <= set("-: "):
            rows.append(cells)
    assert len(found) == 1, f"{path.name}: {len(found)} tables with the header {header!r}, not 1"
    assert found[0], f"{path.name}: the table {header!r} has no rows"
    return found[0]


def code(cell: str) -> list[str]:
    """The backticked words of a cell, in order."""
    return re.findall(r"`([^`]+)`", cell)


# -- the dashboard's keys: gpudash/tui/actions.py ----------------------------------------------


def _action_keys() -> dict[frozenset[str], str]:
    return {frozenset(KEY_SHOWN.get(k, k) for k in a.keys.split(",")): a.name for a in ACTIONS}


def _key_rows(path: Path) -> list[tuple[frozenset[str], str]]:
    return [(frozenset(code(row[0])), row[0]) for row in table(path, "key | action")]


def test_the_usage_key_table_is_the_actions_catalog() -> None:
    actions = _action_keys()
    listed: list[str] = []
    for keys, cell in _key_rows(DOCS / "usage.md"):
        if not keys or keys in NOT_ACTIONS:
            continue  # the mouse, the palette
        assert keys in actions, f"docs/usage.md lists {cell}, which is no Action's keys ({sorted(actions.values())})"
        listed.append(actions[keys])
    assert sorted(listed) == sorted(actions.values()), (
        f"docs/usage.md's key table must list each Action once: missing "
        f"{sorted(set(actions.values()) - set(listed))}, repeated {sorted(n for n in listed if listed.count(n) > 1)}"
    )


def test_the_readme_keys_are_actions() -> None:
    actions = _action_keys()
    for keys, cell in _key_rows(README):
        assert keys in actions or keys in NOT_ACTIONS, f"README lists {cell}, which is no Action's keys"


# -- the knobs: workloads/knobs.py ---------------------------------------------------------------


def test_the_knob_table_is_the_knob_catalog() -> None:
    rows = table(DOCS / "usage.md", "knob | values | what it does | where it applies")
    assert [code(r[0])[0] for r in rows] == list(KNOBS), "docs/usage.md's knob table: the catalog's knobs, in order"
    for name, values, _what, where in (r[:4] for r in rows):
        k = KNOBS[code(name)[0]]
        assert tuple(code(values)) == k.values, f"{k.name}: values {code(values)} in the docs, {k.values} in the code"
        assert ("CUDA" in where) == k.needs_cuda, f"{k.name}: 'where it applies' must say CUDA iff it needs CUDA"
        assert ("--nproc" in where) == k.needs_ddp, f"{k.name}: 'where it applies' must name --nproc iff it needs DDP"


# -- the variants and defaults: workloads/registry.py -------------------------------------------


def test_the_variant_table_is_the_variant_catalog() -> None:
    rows = table(DOCS / "workloads.md", "family | variant | what changes | needs CUDA")
    listed = [(code(r[0])[0], code(r[1])[0]) for r in rows]
    catalog = [(f.name, v.name) for f in FAMILIES.values() for v in f.variants]
    assert listed == catalog, "docs/workloads.md's variant table: every family's variants, in the catalog's order"
    for (fam, var), row in zip(listed, rows, strict=False):
        v = FAMILIES[fam].variant(var)
        assert bool(row[3].strip()) == v.needs_cuda, f"{fam}/{var}: 'needs CUDA' is filled iff it needs CUDA"
    for f in FAMILIES.values():  # the page says the first variant of each family is its default
        assert f.default_variant == f.variants[0].name, f"{f.name}: the default is no longer the first variant"
    text = " ".join((DOCS / "workloads.md").read_text(encoding="utf-8").split())
    toggles = {f.name: f.pipeline_toggle for f in FAMILIES.values() if f.pipeline_toggle is not None}
    said = dict(re.findall(r"`(\w+)` between (`[\w-]+` and `[\w-]+`)", text))
    assert said == {n: f"`{a}` and `{b}`" for n, (a, b) in toggles.items()}, "what the p key toggles, per family"


def test_the_defaults_table_is_the_catalogs() -> None:
    rows = table(DOCS / "workloads.md", "family | batch, image on CUDA | batch, image on the CPU")
    assert [code(r[0])[0] for r in rows] == list(FAMILIES), "docs/workloads.md's defaults: every family, in order"
    for row in rows:
        f = FAMILIES[code(row[0])[0]]
        for cell, d in ((row[1], f.cuda_defaults), (row[2], f.cpu_defaults)):
            if f.source is not None:  # written against gpudash.api: its batches set the image size
                assert cell.startswith(f"{d.batch_size}, ") and cell.endswith("(its own)"), f"{f.name}: {cell!r}"
                continue
            assert cell == f"{d.batch_size}, {d.image_size}", f"{f.name}: {cell!r} in the docs, {d} in the code"


# -- fault injection: gpudash/core/faults.py ----------------------------------------------------------


def test_the_fault_table_is_the_fault_catalog() -> None:
    rows = table(DOCS / "testing.md", "value | what fails")
    listed = [form for row in rows for form in code(row[0])]
    kinds = [f.split("@", 1)[0] for f in listed]
    assert sorted(kinds) == sorted(FORMS), f"docs/testing.md's faults {kinds}, the code's {list(FORMS)}"
    for form in listed:
        kind, point = re.match(r"([\w-]+)@(\w+)", form).groups()  # type: ignore[union-attr]
        assert point == FORMS[kind].point, f"{form}: {kind} counts {FORMS[kind].point}s"


# -- the CSV: gpudash/recording/csvformat.py ---------------------------------------------------------------


def test_the_csv_column_table_is_the_csv_format() -> None:
    rows = table(DOCS / "usage.md", "column | what it holds")
    listed = [code(r[0])[0] for r in rows]
    assert listed == header(["N"]), (  # type: ignore[list-item]
        "docs/usage.md's CSV columns: a recording's header for one GPU (gpuN_…), in order"
    )
    cell = dict(zip(listed, (r[1] for r in rows), strict=False))
    assert code(cell["row_kind"]) == list(ROW_KINDS), "the row_kind cell names csvformat.ROW_KINDS"
    assert sorted(code(cell["event_kind"])) == sorted(k.value for k in EventKind), (
        "the event_kind cell names EventKind's"
    )


# -- verdicts, exit statuses, presets ------------------------------------------------------------


def test_the_verdict_table_is_the_verdicts() -> None:
    rows = table(DOCS / "measuring.md", "verdict | when")
    assert [code(r[0])[0] for r in rows] == [v.value for v in Verdict], (
        "docs/measuring.md's verdicts: Verdict's, in order"
    )
    readme = README.read_text(encoding="utf-8")
    assert all(v.value in readme for v in Verdict), "the README's colours and verdicts name every verdict"


def test_the_exit_status_table_is_exit_code() -> None:
    rows = table(DOCS / "usage.md", "exit status | when")
    assert [int(r[0]) for r in rows] == sorted(int(c) for c in ExitCode), "docs/usage.md's exit statuses: ExitCode's"


def test_every_sweep_preset_is_named() -> None:
    from gpudash.sweep.presets import PRESETS  # torch-free

    text = (DOCS / "measuring.md").read_text(encoding="utf-8")
    assert [p for p in PRESETS if f"`{p}`" not in text and f"--preset {p}" not in text] == [], (
        "docs/measuring.md names every sweep preset"
    )


def test_the_benchmark_table_names_every_case() -> None:
    rows = table(DOCS / "measurements.md", "case | what it measures | run it | takes | output")
    listed = sorted(code(r[0])[0] for r in rows)
    argv = [sys.executable, "-m", "benchmarks", "list", "--json"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    cases = sorted(c["name"] for c in json.loads(done.stdout))
    assert listed == cases, "docs/measurements.md's benchmark cases: every case of `python -m benchmarks list`, once"
    assert all(f"python -m benchmarks run {code(r[0])[0]}" in r[2] for r in rows), "each case's row says how to run it"


def test_no_test_imports_from_benchmarks() -> None:
    """benchmarks/ holds tools to re-run, not code the tests need (that lives in tests/ or gpudash/)."""
    found = [
        f"{path.relative_to(ROOT).as_posix()} imports {name}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for name in sorted(_imported_names(path))
        if name.split(".")[0] == "benchmarks"
    ]
    assert found == [], found


# -- the layer picture: the imports -------------------------------------------------------------


def _floors() -> dict[str, int]:
    floors: dict[str, int] = {}
    for row in table(DOCS / "architecture.md", "floor | modules"):
        floor = int(row[0].split()[0])
        for path in code(row[1]):
            assert path not in floors, f"{path} stands on two floors"
            floors[path] = floor
    return floors


def _imported_names(path: Path) -> set[str]:
    """The dotted names ``path`` imports anywhere in it (inside functions too), relative ones made absolute."""
    package = path.parent.relative_to(ROOT).parts
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def imports_of(path: Path) -> set[str]:
    """The repository's modules that ``path`` imports anywhere in it (inside functions too), as paths."""
    out = set()
    for name in _imported_names(path):
        candidate = ROOT / (name.replace(".", "/") + ".py")
        if candidate.is_file() and candidate != path:
            out.add(candidate.relative_to(ROOT).as_posix())
    return out


def test_the_layer_picture_holds() -> None:
    floors = _floors()
    modules = sorted(
        p.relative_to(ROOT).as_posix()
        for pkg in ("gpudash", "workloads")
        for p in (ROOT / pkg).rglob("*.py")
        if p.name != "__init__.py"
    )
    assert sorted(floors) == modules, (
        f"docs/architecture.md's floors: missing {sorted(set(modules) - set(floors))}, "
        f"gone {sorted(set(floors) - set(modules))}"
    )
    upward = [
        f"{m} (floor {floors[m]}) imports {d} (floor {floors[d]})"
        for m in modules
        for d in sorted(imports_of(ROOT / m))
        if floors[d] > floors[m]
    ]
    assert upward == [], "imports that run up the layer picture: move a module or redraw the picture"


# -- the README as a first contact ---------------------------------------------------------------


def test_the_readme_is_a_first_contact() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; the manual goes to docs/ (at most {README_LIMIT})"


def _readme_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "the README's first code block holds the two set-up commands"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_test_command_is_what_ci_runs() -> None:
    install, test = _readme_commands()
    assert install.endswith("pip install -e . && gpudash")
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    marker = next(i for i, line in enumerate(lines) if "the README's second command, verbatim" in line)
    ci = lines[marker + 1].strip()
    assert test == ci or test.endswith(" && " + ci), f"README: {test!r}; .ci/run: {ci!r}"
    assert test in (DOCS / "testing.md").read_text(encoding="utf-8"), "docs/testing.md shows the same command"


def test_these_checks_import_no_torch() -> None:
    code_ = "import sys, tests.test_docs; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code_], cwd=ROOT).returncode == 0
