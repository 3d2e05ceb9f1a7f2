"""A recording's files must be distinct (issue 11, failure 3): ``--record``, ``--meta`` and ``--log``
naming one file, by any name, is one line and exit 2 before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudash.arguments.argtypes import UsageError
from gpudash.cli.main import main
from gpudash.recording.paths import check_distinct_outputs


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line of a run that must be refused with exit status 2."""
    try:
        code = main([*argv, "-w", "sync_loss", "--device", "cpu", "--image-size", "16", "--steps", "2"])
    except SystemExit as exc:
        code = int(exc.code or 0)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    return lines[0]


def test_metadata_onto_the_csv_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = str(tmp_path / "a.csv")
    line = refusal(["--record", csv, "--meta", csv], capsys)
    assert line == f"gpudash: error: --meta {csv} and --record {csv} are the same file: give each its own"
    assert not Path(csv).exists()


def test_the_log_onto_the_csv_is_refused_by_another_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    line = refusal(["--record", "b.csv", "--log", f"../{tmp_path.name}/./b.csv"], capsys)
    assert "--record b.csv are the same file" in line


def test_a_symlink_to_the_csv_is_the_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "c.csv"
    (tmp_path / "link.json").symlink_to(csv)
    line = refusal(["--record", str(csv), "--meta", str(tmp_path / "link.json")], capsys)
    assert "are the same file" in line


def test_a_flag_onto_another_files_default_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv, meta = tmp_path / "d.csv", tmp_path / "d.json"
    line = refusal(["--record", str(csv), "--log", str(meta)], capsys)
    assert line.endswith(f"--log {meta} and the metadata file (default: {meta}) are the same file: give each its own")


def test_stdout_redirected_to_the_metadata_file_is_refused(tmp_path: Path) -> None:
    """``gpudash --record - --meta out.json > out.json``: '-' is standard output, wherever it goes."""
    out = tmp_path / "out.json"
    with open(out, "w") as stdout:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpudash",
                "--record",
                "-",
                "--meta",
                str(out),
                "-w",
                "sync_loss",
                "--device",
                "cpu",
                "--steps",
                "2",
            ],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.strip() == f"gpudash: error: --meta {out} and --record - are the same file: give each its own"


def test_distinct_files_pass(tmp_path: Path) -> None:
    check_distinct_outputs(str(tmp_path / "e.csv"), str(tmp_path / "e.meta.json"), str(tmp_path / "e.child.log"))
    check_distinct_outputs("-", None, None)  # stdout, no metadata file, a temporary log


def test_a_hard_link_is_the_same_file(tmp_path: Path) -> None:
    csv = tmp_path / "f.csv"
    csv.touch()
    os.link(csv, tmp_path / "hard.json")
    with pytest.raises(UsageError, match="are the same file"):
        check_distinct_outputs(str(csv), str(tmp_path / "hard.json"), None)
