"""A job's command line as gpudash reads it: named by its script behind a launcher module or inside
a shell's command string, which is a command and not a script to look for; ``--steps`` as the job
runs it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.test_job import JOBS, gpudash, samples


def test_a_job_is_named_by_its_script_behind_a_launcher_module() -> None:
    from gpudash.job.command import variant, workload_name

    command = ["python", "-m", "torch.distributed.run", "--nproc-per-node", "2", "train.py", "--lr", "1e-3"]
    assert (workload_name(command), variant(command)) == ("job:train.py", "--lr 1e-3")
    assert variant(["python", "train.py", "a\nb|c"]) == "$'a\\x0ab|c'"  # one line, as bash would quote it


def test_a_shell_string_is_a_command_and_its_job_is_named_by_the_script_it_runs() -> None:
    """``bash -c "cd … && python train.py"``: the string is not a script to look for (it was refused
    as "no such file"); the job is named by the script the string runs."""
    from gpudash.job.command import check_command, script_index, variant, workload_name

    command = ["bash", "-c", f"cd {JOBS} && python plain_loop.py --steps 3"]
    check_command(command)  # no JobCommandError
    assert workload_name(command) == "job:plain_loop.py"
    assert variant(command) == shlex.join(command[1:])
    assert workload_name(["python", "-c", "print(1)"]) == "job:python"
    login_shell = ["bash", "-lc", "python train.py --lr 3e-4"]  # a shell's flags joined before -c
    assert (workload_name(login_shell), script_index(login_shell)) == ("job:train.py", None)


def test_a_script_whose_path_holds_a_space_names_the_job_and_its_arguments_are_the_variant(tmp_path: Path) -> None:
    """``python -O "my runs/train.py" 1500``: the job is ``train.py`` and its variant ``1500`` (it was
    named ``job:python``, the script's path and all in its variant)."""
    from gpudash.job.command import check_command, variant, workload_name

    script = tmp_path / "my runs" / "train.py"
    script.parent.mkdir()
    script.write_text("print('ran')\n")
    command = ["python", "-O", str(script), "1500"]
    check_command(command)
    assert (workload_name(command), variant(command)) == ("job:train.py", "1500")
    # a string with a space that is no file is not a script: the shell's string is what it is
    assert workload_name(["sh", "-c", f"python {script}"]) == "job:train.py"


@pytest.mark.slow
def test_a_shell_string_that_runs_a_script_is_recorded(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    job = f"cd {shlex.quote(str(JOBS))} && {shlex.quote(sys.executable)} plain_loop.py --steps 30 --workers 0"
    done = gpudash("record", str(out), "-q", "--", "bash", "-c", job)
    assert done.returncode == 0, done.stderr[-2000:]
    assert samples(out) and samples(out)[-1]["workload"] == "job:plain_loop.py"
    assert int(samples(out)[-1]["steps"]) == 30


@pytest.mark.slow
def test_steps_ends_a_fast_job_at_that_step_and_records_them_all(tmp_path: Path) -> None:
    """``--steps 60`` of a job of thousands of steps a second: it ends at its 60th (it ran 420 of 50,
    gpudash's request a second's steps late), its own ``finally`` runs, and the recording has them."""
    out = tmp_path / "r.csv"
    job = (sys.executable, str(JOBS / "fast_finally.py"), "1e9")
    done = gpudash("record", str(out), "-q", "--steps", "60", "--", *job)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "JOB ran 60 steps" in done.stdout.splitlines(), done.stdout[-500:]
    assert int(samples(out)[-1]["steps"]) == 60
