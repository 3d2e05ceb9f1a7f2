"""The command line: bad input is one line and exit 2 before anything starts; --help is light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpudash.cli import main
from gpudash import devices
from gpudash.devices import cuda_devices, cuda_index_hint, visible_devices
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
    ("argv", "says"),
    [
        (["-w", "nope"], "unknown workload 'nope'"),
        (["-w", "encdec", "-v", "nope"], "unknown variant 'nope'"),
        (["-b", "0"], "at least 1"),
        (["-b", "-3"], "at least 1"),
        (["-b", "eight"], "whole number"),
        (["-b", "2.5"], "whole number"),
        (["--image-size", "100"], "power of two"),
        (["--device", "gpu"], "auto, cpu, cuda or cuda:N"),
        (["--duration", "0", "--record", "x.csv"], "more than 0"),
        (["--interval", "abc"], "number of seconds"),
        (["--steps", "0"], "at least 1"),
        (["--workers", "-1"], "0 or more"),
        (["--record", "/no/such/dir/run.csv"], "does not exist"),
        (["--record", "."], "is a directory"),
        (["--duration", "5"], "only applies with --record"),
        (["-w", "encdec", "-v", "pipelined", "--device", "cpu"], "needs CUDA"),
        (["--bogus"], "unrecognized arguments"),
        (["replay", "/no/such/run.csv"], "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], says: str, capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(argv) == 2
    assert says in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []  # nothing was started or created


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
    real_listdir = devices.os.listdir
    nodes = ["nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"]
    monkeypatch.setattr(devices.os, "listdir", lambda path: nodes if path == "/dev" else real_listdir(path))
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


def test_help_is_light() -> None:
    code = (
        "import sys, contextlib, io\n"
        "from gpudash.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0\n"
        "assert '--record' in out.getvalue()\n"
        "print(sorted(m for m in ('torch', 'textual', 'pynvml', 'numpy') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_console_script_help_and_version() -> None:
    r = subprocess.run([sys.executable, "-m", "gpudash", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("gpudash ")
