"""The command line: bad input is one line and exit 2 before anything starts; --help is light."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpudash.cli.main import main
from gpudash.host import gpu_checks
from gpudash.host.devices import cuda_index_hint, visible_devices
from gpudash.host.gpu_checks import cuda_devices
from gpudash.recording.headless_report import progress_line
from gpudash.recording.paths import shown
from gpudash.stats.segments import SegmentTracker
from tests import printed
from tests.tui.fakes import sample, started
from workloads.registry import FAMILIES

HAS_CUDA = cuda_devices()[0] > 0


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gpudash: error: ")
    assert out == ""
    return lines[0]


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse errors
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("command_line", "says"),
    [
        ("-w nope", "unknown workload 'nope'"),
        ("-w encdec -v nope", "unknown variant 'nope'"),
        ("-b 0", "at least 1"),
        ("-b -3", "at least 1"),
        ("-b eight", "whole number"),
        ("-b 2.5", "whole number"),
        ("--image-size 100", "power of two"),
        ("--device gpu", "auto, cpu, cuda or cuda:N"),
        ("--duration 0 --record x.csv", "more than 0"),
        ("--interval abc", "number of seconds"),
        ("--steps 0", "at least 1"),
        ("--workers -1", "0 or more"),
        ("--record /no/such/dir/run.csv", "does not exist"),
        ("--record .", "is a directory"),
        ("--duration 5", "only applies with --record"),
        ("-w encdec -v pipelined --device cpu", "needs CUDA"),
        ("--bogus", "--bogus is not an option"),
        ("replay /no/such/run.csv", "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    command_line: str, says: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert says in refused(command_line, capsys, tmp_path, monkeypatch)


def refused(
    command_line: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The one error line ``gpudash COMMAND_LINE`` says in ``tmp_path``, where it exits 2 and has
    started or created nothing."""
    monkeypatch.chdir(tmp_path)
    assert run(command_line.split()) == 2
    line = one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []
    return line


@pytest.mark.skipif(HAS_CUDA, reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("argv", [["--device", "cuda"], ["--device", "cuda:1"], ["-v", "pipelined"]])
def test_cuda_asked_for_without_a_gpu(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--record", "-", *argv]) == 2
    assert "no CUDA GPU" in one_error_line(capsys)


@pytest.mark.skipif(HAS_CUDA, reason="this machine has a CUDA GPU")
def test_variant_that_needs_cuda_without_a_gpu_says_the_catalogs_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    refusal = FAMILIES["encdec"].variant("pipelined").refusal("cpu")
    assert refusal
    assert run(["--record", "-", "-w", "encdec", "-v", "pipelined"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"gpudash: error: {refusal}, and no CUDA GPU was found (")


def test_variant_that_needs_cuda_on_the_cpu_is_the_catalogs_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    refusal = FAMILIES["encdec"].variant("pipelined").refusal("cpu")
    assert refusal
    assert run(["--record", "-", "-w", "encdec", "-v", "pipelined", "--device", "cpu"]) == 2
    assert one_error_line(capsys) == f"gpudash: error: {refusal}: run it with --device cuda"


def test_cuda_visible_devices_one_parser() -> None:
    assert visible_devices(None) is None  # unset: every GPU
    assert visible_devices("") == []  # set but empty: none
    assert visible_devices("0,2") == ["0", "2"]
    assert visible_devices(" 1 , 0 ") == ["1", "0"]
    assert visible_devices("0,-1,2") == ["0"]  # CUDA stops at the first invalid entry
    assert visible_devices("-1") == []
    assert visible_devices("0,,2") == ["0"]
    assert visible_devices("0,nope,2") == ["0"]
    assert visible_devices("GPU-8932f937-d72c,1") == ["GPU-8932f937-d72c", "1"]
    assert visible_devices("MIG-GPU-8932f937/1/0") == ["MIG-GPU-8932f937/1/0"]


def test_both_callers_read_cuda_visible_devices_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    real_listdir = gpu_checks.os.listdir
    nodes = ["nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"]
    monkeypatch.setattr(gpu_checks.os, "listdir", lambda path: nodes if path == "/dev" else real_listdir(path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert cuda_devices() == (3, "")
    assert cuda_index_hint("cuda:1") == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    assert cuda_devices() == (2, "")
    assert cuda_index_hint("cuda:1") == 2 and cuda_index_hint("cuda:0") == 0 and cuda_index_hint("auto") == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,-1,2")
    assert cuda_devices() == (1, "")
    assert cuda_index_hint("cuda:1") == 1  # past the visible list: no mapping
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8932f937,2")
    assert cuda_devices() == (2, "")
    assert cuda_index_hint("cuda:0") == 0 and cuda_index_hint("cuda:1") == 2  # a UUID maps to no index
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cuda_devices() == (0, "CUDA_VISIBLE_DEVICES='' hides every GPU")


def test_cuda_visible_devices_hides_all(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert run(["--record", "-", "--device", "cuda"]) == 2
    one_error_line(capsys)


def test_unwritable_existing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert run(["--record", str(blocker / "run.csv")]) == 2  # a path under a file
    assert "cannot write" in one_error_line(capsys)


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for info in FAMILIES.values():
        assert info.name in out
        for v in info.variants:
            assert v.name in out
    assert "[needs CUDA]" in out and "default" in out


# -- subcommands ------------------------------------------------------------------------------------
COMMANDS = ["run", "record", "list", "replay", "sweep", "report", "serve"]


def gpudash(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpudash", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_top_level_help_lists_every_command() -> None:
    r = gpudash("--help")
    assert r.returncode == 0
    listed = r.stdout.split("commands:", 1)[1]
    for name in COMMANDS:
        assert f"\n    {name} " in listed


# every command's --help in one process (``HELPS``): (its exit status, stdout, stderr) a JSON line each
HELPS = """
import contextlib, io, json, sys
from gpudash.cli.main import main
for name in sys.argv[1:]:
    out, err, code = io.StringIO(), io.StringIO(), None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([name, "--help"])
        except SystemExit as e:
            code = e.code
    print(json.dumps([name, code, out.getvalue(), err.getvalue()]))
"""


@pytest.fixture(scope="module")
def helps() -> dict[str, tuple[int | None, str, str]]:
    """Each command's ``--help``: (exit status, stdout, stderr), from one ``python`` process."""
    r = subprocess.run([sys.executable, "-c", HELPS, *COMMANDS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return {name: (code, out, err) for name, code, out, err in map(json.loads, r.stdout.splitlines())}


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_has_its_own_help(name: str, helps: dict[str, tuple[int | None, str, str]]) -> None:
    code, stdout, stderr = helps[name]
    assert code in (0, None) and stderr == ""
    assert stdout.startswith(f"usage: gpudash {name} ")
    own = {
        "run": "--theme",
        "record": "--force",
        "list": "only this family",
        "replay": "--follow",
        "sweep": "--preset",
        "report": "--html",
        "serve": "--host",
    }[name]
    assert own in stdout


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag: str) -> None:
    r = gpudash(flag)
    assert r.returncode == 0 and r.stdout.startswith("gpudash ") and r.stdout.split()[1][0].isdigit()


def test_options_before_list_filter_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-w", "augment", "list"]) == 0
    before = capsys.readouterr().out
    assert main(["list", "-w", "augment"]) == 0
    assert capsys.readouterr().out == before
    assert "augment" in before and "gpu-vectorized" in before
    assert "encdec" not in before and "sync-heavy" not in before


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["-v", "gpu", "list"], "-v/--variant does not apply to 'gpudash list'"),
        (["-w", "nope", "list"], "unknown workload 'nope'"),
        (["-w", "augment", "sweep", "--out", "x"], "-w/--workload before 'sweep': give sweep's options after it"),
        (["--device", "cpu", "report", "a.csv", "--out", "x"], "--device before 'report'"),
        (["--record", "x.csv", "run"], "--record does not apply to 'gpudash run'"),
        (["--duration", "5", "serve"], "--duration does not apply to 'gpudash serve'"),
        (["-w", "augment", "replay", "x.csv"], "-w/--workload does not apply to 'gpudash replay'"),
        (["run", "--record", "x.csv"], "unrecognized arguments: --record"),
        (["record"], "the following arguments are required: PATH"),
        (["record", "/no/such/dir/run.csv"], "does not exist"),
        (["record", "x.csv", "-b", "0"], "at least 1"),
        (["serve", "--port", "70000"], "a port from 1 to 65535"),
        (["serve", "--port", "0"], "a port from 1 to 65535"),
        (["serve", "-w", "nope"], "unknown workload 'nope'"),
        (["nope"], "invalid choice: 'nope'"),
    ],
)
def test_subcommand_misuse_is_one_line_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(argv) == 2
    assert says in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_options_before_a_running_command_merge_with_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    # -w before 'record', -v after it: one configuration, checked as a whole (and refused: no GPU variant on a CPU)
    refusal = FAMILIES["augment"].variant("pipelined").refusal("cpu")
    assert run(["-w", "augment", "record", "-", "-v", "pipelined", "--device", "cpu"]) == 2
    assert one_error_line(capsys) == f"gpudash: error: {refusal}: run it with --device cuda"


# -- --record refuses an existing file ----------------------------------------------------------------
@pytest.mark.parametrize("form", [["--record"], ["record"]])
def test_record_refuses_an_existing_file_unless_forced(
    form: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "run.csv"
    old.write_text("an earlier run\n")
    assert run([*form, str(old), "--device", "cpu"]) == 2
    # the path as one-line messages show it (abbreviated past 80 characters, as a deep temp dir may be)
    assert (
        one_error_line(capsys)
        == f"gpudash: error: {shown(str(old))} exists; give --force to overwrite it, or another name"
    )
    assert old.read_text() == "an earlier run\n"
    # --force gets past that check (to the next one: the metadata folder does not exist)
    assert run([*form, str(old), "--device", "cpu", "--force", "--meta", str(tmp_path / "no" / "m.json")]) == 2
    assert "does not exist" in one_error_line(capsys)
    assert old.read_text() == "an earlier run\n"


@pytest.mark.slow
def test_forced_recording_overwrites_and_says_how_it_goes(tmp_path: Path) -> None:
    old = tmp_path / "run.csv"
    old.write_text("an earlier run\n")
    args = ["record", "run.csv", "--force", "-w", "sync_loss", "--image-size", "16", "--device", "cpu"]
    args += ["--progress-every", "0.5", "--sample-interval", "0.1"]
    r = gpudash(*args, "--duration", "3", cwd=tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr
    assert old.read_text().startswith("row_kind,")  # the CSV replaced the earlier run
    said = [line for line in r.stderr.splitlines() if "elapsed of" in line]
    progress = printed.progress_lines(r.stderr)  # each by its parts (a loaded machine adds " · ⚠ noisy: …")
    assert progress and len(progress) == len(said), said
    for p in progress:
        assert p.duration_s == 3 and p.elapsed_s <= 3, p
        assert p.label is None or re.fullmatch(r"sync_loss/sync-heavy bs\d+", p.label), p
        if p.figure is not None:  # the configuration's mean: with its interval, or what it lacks for one
            assert p.figure.has_interval == (p.samples is not None), p
            assert p.figure.has_interval or p.too_short.startswith("needs"), p
    quiet = gpudash(*args, "--duration", "1", "-q", cwd=tmp_path, timeout=180)  # two progress lines' time at least
    assert quiet.returncode == 0 and "elapsed" not in quiet.stderr


def test_progress_line_gives_the_rate_now_the_configurations_mean_and_the_time() -> None:
    tracker = SegmentTracker()
    tracker.on_event(started(0.0, batch=8))
    assert progress_line(None, tracker.current, 2.0) == "no sample yet · warming up · 00:02 elapsed"
    first = sample(0.25, 100.0)
    tracker.on_sample(first)
    assert progress_line(first, tracker.current, 5.0, 60.0) == (
        "100 steps/s now · encdec/serial bs8 warming up · 00:05 elapsed of 01:00"
    )
    rates = [100.0 + (i % 5) for i in range(2, 400)]
    for i, rate in enumerate(rates, start=2):
        last = sample(0.25 * i, rate)
        tracker.on_sample(last)
    line = progress_line(last, tracker.current, 100.0, 60.0)
    p = printed.progress(line)
    assert p is not None and p.figure is not None and p.figure.half_width is not None, line
    assert (p.now, p.label, p.too_short, p.noisy) == (round(rates[-1]), "encdec/serial bs8", "", ""), line
    assert (p.elapsed_s, p.duration_s) == (100, 60), line
    assert p.figure.mean == pytest.approx(sum(rates) / len(rates), abs=0.1)
    assert 0 < p.figure.half_width < 1 and p.samples is not None and p.samples > 300


def test_help_is_light() -> None:
    code = (
        "import sys, contextlib, io\n"
        "from gpudash.cli.main import main\n"
        "for argv in (['--help'], ['serve', '--help'], ['record', '--help'], ['-V']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit as e:\n"
        "            assert e.code == 0\n"
        "    assert 'gpudash' in out.getvalue()\n"
        "heavy = ('torch', 'textual', 'textual_serve', 'aiohttp', 'pynvml', 'numpy', 'rich.console')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_every_option_that_fills_a_run_config_field_names_a_real_field_and_option() -> None:
    """``RUN_OPTIONS`` (field: option) is read by name, so neither side is checked by the type checker."""
    import dataclasses

    from gpudash.cli.options import DEFAULTS
    from gpudash.cli.run_options import RUN_OPTIONS
    from gpudash.core.protocol import RunConfig

    assert set(RUN_OPTIONS) <= {f.name for f in dataclasses.fields(RunConfig)}
    assert set(RUN_OPTIONS.values()) <= set(DEFAULTS)  # every option's dest has its default there


def test_a_ctrl_c_that_lands_in_a_class_being_made_is_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ctrl-C during a lazy import (a sweep's progress bar loading rich) can land in a dataclass's
    ``__set_name__``, which Python 3.11 wraps in a RuntimeError: still the interrupt's one line and
    status 130, no traceback; any other RuntimeError is not taken for one."""
    import gpudash.cli.main as cli_main

    def interrupted_import(argv: list[str]) -> int:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance '_cells' in 'Column'") from exc

    monkeypatch.setattr(cli_main, "dispatch", interrupted_import)
    assert main(["sweep"]) == 130
    assert capsys.readouterr().err == "gpudash: interrupted\n"

    def broken(argv: list[str]) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli_main, "dispatch", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["sweep"])
