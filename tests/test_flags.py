"""The flags a user carries from one command to the next (-q/--quiet, --json, --device): the same
spelling, short form, help and meaning on every subcommand that prints progress, prints results or
runs a workload (``gpudash/arguments/shared_flags.py``), and each one doing what it says."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest

from gpudash.arguments import shared_flags
from gpudash.arguments.argparse_adapter import parser_actions
from gpudash.cli.main import main
from gpudash.cli.parsers import PASSTHROUGH, build_parsers, own_parser
from tests.helpers import GPUDASH

# Every command and the shared flags that apply to it. A new subcommand fails the test until it is
# listed here with its flags: quiet where it prints progress, json where it prints results, device
# where it runs a workload. ("gpudash" is the command without a subcommand: the dashboard, --record.)
APPLIES: dict[str, set[str]] = {
    "gpudash": {"quiet", "device"},  # -q with --record
    "run": {"device"},  # the dashboard: no progress lines, no printed results
    "record": {"quiet", "device"},  # its results are the CSV ('-': stdout), not a printout
    "diagnose": {"quiet", "json", "device"},
    "list": set(),  # the catalog, no workload run, nothing measured
    "replay": set(),  # the dashboard over a file
    "sweep": {"quiet", "json", "device"},
    "tune": {"quiet", "json", "device"},
    "report": {"quiet", "json"},  # reads recordings; runs nothing
    "watch": {"quiet", "json"},  # -q with --record, --json with --once; runs no workload
    "serve": {"device"},  # each browser tab runs a workload
}
FIXTURE = Path(__file__).parent / "tui" / "data" / "replay.csv"  # encdec on an H100: four segments
TINY = """
import torch
from torch import nn
from gpudash.api import Training


def workload(batch_size, device):
    model = nn.Linear(4, 2)
    data = torch.utils.data.TensorDataset(torch.randn(256, 4), torch.randint(0, 2, (256,)))
    loader = torch.utils.data.DataLoader(data, batch_size, drop_last=True)
    return Training(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), loader=loader)
"""


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's real parser: the subcommands' own where they read their own arguments."""
    top, commands = build_parsers()
    own = {name: own_parser(name) if name in PASSTHROUGH else p for name, p in commands.items()}
    return {"gpudash": top, **own}


def _shape(action: argparse.Action) -> tuple[object, ...]:
    """What a user sees of a flag: its spellings, help, kind and the type that checks its value."""
    return (tuple(action.option_strings), action.help, type(action), action.type, action.nargs, action.metavar)


def test_every_command_takes_the_shared_flags_that_apply_to_it_spelled_and_checked_alike() -> None:
    reference = argparse.ArgumentParser()
    for add in (shared_flags.add_quiet, shared_flags.add_json, shared_flags.add_device):
        add(reference)
    canonical = {a.dest: _shape(a) for a in parser_actions(reference) if a.dest in shared_flags.SHARED_FLAGS}
    assert set(canonical) == set(shared_flags.SHARED_FLAGS)
    parsers = _parsers()
    assert sorted(parsers) == sorted(APPLIES), "a new subcommand: list it in APPLIES with the shared flags it takes"
    wrong = []
    for name, parser in parsers.items():
        actions = {a.dest: a for a in parser_actions(parser)}
        for dest, flags in shared_flags.SHARED_FLAGS.items():
            if dest not in APPLIES[name]:
                taken = dest in actions and any(f in actions[dest].option_strings for f in flags)
                wrong += [f"{name}: takes {'/'.join(flags)}, which the table says does not apply"] if taken else []
            elif dest not in actions:
                wrong.append(f"{name}: lacks {'/'.join(flags)}")
            elif _shape(actions[dest]) != canonical[dest]:
                wrong.append(f"{name}: {'/'.join(flags)} differs: {_shape(actions[dest])}")
    assert not wrong, "\n".join(wrong)


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse errors
        return int(exc.code or 0)


def test_report_quiet_writes_the_report_without_its_lines_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["report", str(FIXTURE), str(FIXTURE), "--out", str(tmp_path / "loud")]) == 0
    loud = capsys.readouterr().err
    assert "no change detected" in loud and "gpudash: wrote report.md" in loud  # what -q leaves out
    assert _run(["report", "-q", str(FIXTURE), str(FIXTURE), "--out", str(tmp_path / "quiet")]) == 0
    assert capsys.readouterr() == ("", "")
    assert "## Between runs" in (tmp_path / "quiet" / "report.md").read_text()


def test_report_json_is_the_only_thing_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["report", str(FIXTURE), str(FIXTURE), "--out", str(tmp_path), "--json"]) == 0
    out, err = capsys.readouterr()
    got = json.loads(out)  # the whole of stdout: one document
    assert [c["name"] for c in got["runs"][0]["configurations"]] == [
        "encdec/serial bs8",
        "encdec/pipelined bs8",
        "encdec/pipelined bs16",
        "encdec/serial bs16",
    ]
    steps = got["runs"][0]["configurations"][0]["steps_per_s"]
    assert steps["low"] < steps["mean"] < steps["high"]
    assert len(got["comparisons"]) == 4 and {c["verdict"] for c in got["comparisons"]} == {"no change detected"}
    assert all(c["low"] <= 1.0 <= c["high"] for c in got["comparisons"])  # A/A: the interval holds 1
    assert "gpudash: wrote report.md" in err  # the lines stay on stderr without -q
    assert sorted(got["written"]) == sorted(p.name for p in tmp_path.iterdir())


REQUIRED = {"record": ["run.csv"], "sweep": ["-w", "sync_loss", "--out", "out"], "tune": ["-w", "sync_loss"]}


@pytest.mark.parametrize("device", ["nvidia", "cuda:99"], ids=["misspelt", "absent"])
def test_a_bad_device_is_the_same_one_line_and_exit_2_on_every_command_that_runs_a_workload(
    device: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    said = {}
    for name in (n for n, flags in APPLIES.items() if "device" in flags):
        argv = [*([] if name == "gpudash" else [name]), *REQUIRED.get(name, []), "--device", device]
        assert _run(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 1 and err.startswith("gpudash: error: "), (argv, out, err)
        said[name] = err
    assert len(set(said.values())) == 1, said  # checked the same way everywhere
    assert not (tmp_path / "run.csv").exists()


def _gpudash(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUDASH, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.slow
def test_diagnose_quiet_json_prints_the_verdict_document_and_nothing_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(TINY)
    r = _gpudash(
        "diagnose",
        "-w",
        "tiny.py:workload",
        "-b",
        "4",
        "--device",
        "cpu",
        "--warmup",
        "0.2",
        "-q",
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr  # without -q: a line saying what runs, for how long
    got = json.loads(r.stdout)
    assert got["workload"] == "tiny.py:workload" and got["batch_size"] == 4 and got["bound"]


@pytest.mark.slow
def test_sweep_json_prints_each_configuration_with_its_figures(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(TINY)
    timing = ["--repeats", "1", "--seconds", "0.3", "--warmup", "0.1", "--device", "cpu"]
    r = _gpudash(
        "sweep",
        "-w",
        "tiny.py:workload",
        "-v",
        "serial",
        "-b",
        "4",
        *timing,
        "-q",
        "--json",
        "--out",
        "sw",
        cwd=tmp_path,
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    got = json.loads(r.stdout)
    (row,) = got["configurations"]
    assert (row["variant"], row["batch_size"]) == ("serial", 4) and row["steps_per_s"] > 0
    assert got["status"] == "done" and got["exit_code"] == 0
    assert json.loads((tmp_path / "sw" / "sweep.json").read_text())["measurements"] == got["measurements"] == 1


@pytest.mark.slow
def test_tune_json_prints_the_answer_document_instead_of_its_lines(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(TINY)
    budget = ["--seconds", "0.3", "--warmup", "0.1", "--max-minutes", "3"]  # a cap: a loaded machine measures later
    r = _gpudash(
        "tune", "-w", "tiny.py:workload", "-b", "4", "--device", "cpu", *budget, "--json", "--out", "tu", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["answer"]["batch_size"] == 4 and got["answer"]["command"].startswith("gpudash -w tiny.py:workload")
    assert got == json.loads((tmp_path / "tu" / "tune.json").read_text())
    assert "gpudash: wrote " in r.stderr  # the info lines stay on stderr without -q
