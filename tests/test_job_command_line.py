"""A job's command line where it is shown in a line too short for it: cut from the middle, the
program and the script by their names, the script never cut off."""

from __future__ import annotations

import pytest

from gpudash.job.command import display, short_display

LONG = [
    "/tmp/venv-with-a-long-name/bin/python",
    "/home/me/projects/vision/experiments/2026/train.py",
    "--lr",
    "3e-4",
    "--data",
    "/mnt/datasets/imagenet/train",
    "--epochs",
    "90",
]


@pytest.mark.parametrize(
    ("width", "shown"),
    [
        (200, display(LONG)),  # it fits: as typed
        (60, "python …/train.py --lr 3e-4 --data …/train --epochs 90"),  # the paths by their names
        (30, "python …/train.py … 90"),  # then the middle goes, the end stays as far as it fits
        (20, "python …/train.py …"),
        (5, "python …/train.py …"),  # never less than the program and the script
    ],
)
def test_a_long_command_is_cut_from_the_middle_and_keeps_the_scripts_name(width: int, shown: str) -> None:
    assert short_display(LONG, width) == shown


def test_the_script_after_a_launchers_flags_is_kept() -> None:
    torchrun = ["torchrun", "--nproc-per-node", "2", "/a/b/c/train.py", "--x", "1"]
    assert short_display(torchrun, 30) == "torchrun --nproc-per-node 2 …/train.py …"
