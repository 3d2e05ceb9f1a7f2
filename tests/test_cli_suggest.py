"""A mistyped command line gets the way out in its one error line: the job written after ``--``,
the command or flag meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli import one_error_line, refused, run


@pytest.mark.parametrize(
    ("command_line", "says"),
    [
        # a job without the -- before it, written back as it should have been typed
        ("diagnose python train.py", "python train.py: a job goes after --: gpudash diagnose -- python train.py"),
        (
            "record run.csv python train.py",
            "python train.py: a job goes after --: gpudash record run.csv -- python train.py",
        ),
        (
            "record run.csv python train.py --lr 3",
            "python train.py --lr 3: a job goes after --: gpudash record run.csv -- python train.py --lr 3",
        ),
        ("python train.py", "'python' is not a command; a job goes after --: gpudash -- python train.py"),
        (
            "train.py --epochs 2",
            "'train.py' is not a command; a job goes after --: gpudash -- python train.py --epochs 2",
        ),
        # a command or a flag mistyped: the closest one
        ("recrod run.csv", "'recrod' is not a command; did you mean 'record'?"),
        ("--duraton 5", "--duraton is not an option; did you mean --duration?"),
        ("record run.csv --duraton=5", "--duraton is not an option; did you mean --duration?"),
        ("diagnose --stepz 5 -- python train.py", "--stepz is not an option; did you mean --steps?"),
        ("watch --onec", "--onec is not an option; did you mean --once?"),
        ("report run.csv --otu folder", "--otu is not an option; did you mean --out?"),
        ("--zzzzzz", "--zzzzzz is not an option (gpudash --help)"),
    ],
)
def test_a_mistyped_command_line_gets_the_fix_in_one_line(
    command_line: str, says: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert refused(command_line, capsys, tmp_path, monkeypatch) == f"gpudash: error: {says}"


def test_a_flag_of_another_command_is_argparses_word_not_a_guess(capsys: pytest.CaptureFixture[str]) -> None:
    # --once is watch's: known to gpudash, so no "did you mean"; argparse says where it is not taken
    assert run(["record", "run.csv", "--once"]) == 2
    assert one_error_line(capsys) == "gpudash: error: unrecognized arguments: --once"


def test_an_abbreviation_a_command_accepts_is_not_called_a_typo(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["report", "--smoo", "x"]) == 2  # --smoo is --smooth's prefix: argparse's own error stands
    assert "is not an option" not in one_error_line(capsys)
