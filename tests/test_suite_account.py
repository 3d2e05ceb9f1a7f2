"""The suite's account (``GPUDASH_SUITE_ACCOUNT``) read back: each file's CPU and wall seconds, the
costliest first, and the processes that imported torch counted apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import suite_account


def test_the_account_sums_each_files_tests_and_counts_the_torch_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {"test": "tests/test_a.py::test_one", "test_cpu_s": 1.5, "wall_s": 2.0},
        {"test": "tests/test_b.py::test_two", "test_cpu_s": 4.0, "wall_s": 9.0},
        {"test": "tests/test_a.py::test_three[x]", "test_cpu_s": 0.5, "wall_s": 1.0},
        {"cpu_s": 3.5, "argv": ["job.py"], "test": "tests/test_b.py::test_two", "torch": True},
        {"cpu_s": 0.3, "argv": ["-c"], "test": "", "torch": False},
    ]
    path = tmp_path / "account.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    tests, processes = suite_account.read(path)
    assert suite_account.by_file(tests) == [("tests/test_b.py", 4.0, 9.0, 1), ("tests/test_a.py", 2.0, 3.0, 2)]
    assert suite_account.main([str(path)]) == 0
    said = capsys.readouterr().out
    assert "3 tests: 6 s of CPU" in said and "2 processes exited through Python: 1 imported torch" in said
