"""On a GPU: each host-device sync named by its exact file and line — a user's loss
(``tests/data/syncs/their_loss.py``, each sync marked ``# SYNC: …``), the sync-heavy family's six
waits in ``workloads/sync_loss.py`` and none in the fixed variant, and ``gpudash diagnose``'s
sync-bound verdict naming the user's lines."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
import torch

from gpudash.boot.gpudash_boot.sync_table import Site, SyncTable
from gpudash.engine.measure import SyncCounter
from tests.helpers import GPUDASH

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
THEIR_LOSS = ROOT / "tests" / "data" / "syncs" / "their_loss.py"
SYNC_LOSS = ROOT / "workloads" / "sync_loss.py"
STEPS = 3


def _marked() -> dict[str, int]:
    """Each ``# SYNC: name`` marker of the user's file: its line."""
    lines = THEIR_LOSS.read_text().splitlines()
    return {text.split("# SYNC:")[1].strip(): n for n, text in enumerate(lines, start=1) if "# SYNC:" in text}


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("their_loss", THEIR_LOSS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sites(table: SyncTable) -> list[Site]:
    return [r.site for r in table.rows if r.site is not None]


def test_each_sync_of_a_users_loss_is_named_by_its_own_line() -> None:
    mine = _load()
    model = torch.nn.Linear(16, 8).cuda()
    x, target = (t.cuda() for t in mine.workload(32, torch.device("cuda")).batch(torch.Generator().manual_seed(0)))
    counter = SyncCounter(sites=True)
    counter.install(torch)
    try:
        assert counter.explicit_not_counted is None, counter.explicit_not_counted
        counter.attributing = True
        for _ in range(STEPS):
            mine.step(model, x, target)
    finally:
        counter.uninstall()
    assert counter.sites is not None
    sites = _sites(counter.sites.table(STEPS, top=20))
    ours = {(s.line, s.called_from.line if s.called_from else None): s for s in sites if s.file == str(THEIR_LOSS)}
    at = _marked()
    # a helper called from two places: two sites on the helper's line, one per calling line
    assert (at["helper"], at["first caller"]) in ours and (at["helper"], at["second caller"]) in ours, sites
    lines = {line for line, _ in ours}
    for name in ("boolean mask", "unique", "any", "item", "synchronize"):
        assert at[name] in lines, f"{name} (line {at[name]}) not named: {sorted(lines)}"
    backward = [s for s in sites if s.line == at["backward"] and s.file == str(THEIR_LOSS)]
    assert backward and all(s.backward for s in backward), sites
    assert not any(s.file.startswith(str(Path(torch.__file__).parent)) for s in sites), sites


def _record(tmp_path: Path, variant: str) -> dict[str, object]:
    csv = tmp_path / f"{variant}.csv"
    argv = [*GPUDASH, "record", str(csv), "-w", "sync_loss", "-v", variant, "--duration", "4", "-q"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    tables = json.loads(csv.with_suffix(".json").read_text())["sync_sites"]
    assert len(tables) == 1, tables
    return dict(next(iter(tables.values())))


def test_the_sync_heavy_family_shows_its_six_waits_by_line_and_the_fixed_one_none(tmp_path: Path) -> None:
    heavy = SyncTable.from_dict(_record(tmp_path, "sync-heavy"))
    assert heavy.steps > 0 and heavy.per_step == pytest.approx(6.0), heavy
    sites = _sites(heavy)
    assert all(row.count == heavy.steps for row in heavy.rows), heavy  # each site once a step
    in_loss = [s for s in sites if s.file == str(SYNC_LOSS)]
    source = SYNC_LOSS.read_text().splitlines()
    assert len(in_loss) == 5 and all(s.text == source[s.line - 1].strip() for s in in_loss), heavy
    assert all(s.called_from is None for s in sites), heavy  # the engine and python -c are no callers
    # the sixth: the boolean mask's backward, raised in autograd and named by the step's backward() line
    (backward,) = [s for s in sites if s not in in_loss]
    assert backward.backward and backward.text == "loss.backward()" and backward.where.startswith("train_step.py:")
    fixed = SyncTable.from_dict(_record(tmp_path, "fixed"))
    assert fixed.steps > 0 and fixed.total == 0 and fixed.rows == ()


def test_diagnose_names_the_lines_of_a_users_file(tmp_path: Path) -> None:
    argv = [*GPUDASH, "diagnose", "-w", f"{THEIR_LOSS}:workload", "--device", "cuda", "--json", "-q"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    verdict = json.loads(r.stdout)
    assert verdict["bound"] == "sync-bound", verdict
    table = SyncTable.from_dict(verdict["evidence"]["sync_sites"])
    lines = {s.line for s in _sites(table) if s.file == str(THEIR_LOSS)}
    at = _marked()
    assert {at["helper"], at["boolean mask"], at["item"], at["synchronize"]} <= lines, table
    assert f"their_loss.py:{at['helper']}" in verdict["why"], verdict["why"]
