"""``gpudash watch``: ``--once`` (table and ``--json``), ``--record`` headless, the machine without
NVML (the watch dashboard, Pilot: tests/test_watch_dashboard.py). NVML is faked at the ``pynvml``
boundary: a box of fake GPUs (``tests/fake_gpus.py``) with process lists, process names and queries
that fail."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudash.cli import main as cli
from gpudash.cli.serve import dashboard_command
from gpudash.core.protocol import GpuSample
from gpudash.recording.replay import ReplaySource, read_all
from gpudash.recording.sidecar import read_sidecar
from gpudash.watch.record import run_watch_record
from tests.fake_gpm import add_gpm
from tests.fake_gpus import WatchBox, installer, watch_box
from tests.helpers import GPUDASH, ROOT
from tests.test_nvml import NVMLError_LibraryNotFound

NOT_A_PID = 4_194_305  # above the largest pid_max Linux allows: never in this machine's /proc
ME = os.getpid()
MY_USER = pwd.getpwuid(os.getuid()).pw_name


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], WatchBox]:
    """``box(n)``: a box of n fake GPUs behind ``pynvml``; CUDA_VISIBLE_DEVICES unset."""
    return installer(monkeypatch, watch_box)


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without the NVIDIA driver: ``nvmlInit`` cannot find the library."""
    m = types.ModuleType("pynvml")

    def init() -> None:
        raise NVMLError_LibraryNotFound()

    m.nvmlInit = init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", m)


def busy_box(box: Callable[[int], WatchBox]) -> WatchBox:
    """Three Hopper GPUs (GPM: GPU i's SM 60+i %, tensor 40+i %, DRAM 20+i %): GPU 0 runs this test's
    process (no NVML name: /proc tells) and one from another pid namespace; GPU 1 a graphics process
    NVML names, its power query failing, its clock throttled; GPU 2 whose process lists both fail."""
    nv = box(3)
    add_gpm(nv)
    nv.compute[0] = {ME: 1536.0, NOT_A_PID: 512.0}
    nv.graphics[1] = {1: 64.0}
    nv.names[1] = "Xorg"
    nv.failing |= {("nvmlDeviceGetPowerUsage", 1), ("compute", 2), ("graphics", 2)}
    nv.gpus[1]["throttle"] = 0x4 | 0x20  # sw_power_cap, sw_thermal
    return nv


def once(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["watch", "--once", *args])
    out, err = capsys.readouterr()
    return code, out, err


# -- --once --json ----------------------------------------------------------------------------------
def test_once_json_gives_every_gpu_its_figures_and_its_processes(box, capsys) -> None:
    busy_box(box)
    code, out, err = once(capsys, "--json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["schema"] == "gpudash-watch/1" and doc["driver"] == "555.42" and doc["gpm_unavailable"] is None
    gpus = doc["gpus"]
    assert [g["index"] for g in gpus] == [0, 1, 2]
    assert [(g["name"], g["uuid"]) for g in gpus] == [(f"Fake GPU {i}", f"GPU-0000-{i}") for i in range(3)]
    g0, g1, g2 = gpus
    assert (g0["utilization_pct"], g0["memory_bandwidth_pct"], g0["power_w"]) == (10.0, 5.0, 100.0)
    assert (g0["memory_used_mib"], g0["memory_total_mib"], g0["sm_clock_mhz"], g0["temperature_c"]) == (
        1024.0,
        81920.0,
        1400.0,
        40.0,
    )
    assert g0["throttle_reasons"] == [] and g0["errors"] == {}
    # GPM's, over the window before the read: each GPU its own, beside kernel-active
    assert [(g["sm_active_pct"], g["tensor_active_pct"], g["dram_active_pct"]) for g in gpus] == [
        (60.0 + i, 40.0 + i, 20.0 + i) for i in range(3)
    ]
    mine, elsewhere = g0["processes"]
    assert (mine["pid"], mine["user"], mine["used_memory_mib"], mine["type"]) == (ME, MY_USER, 1536.0, "compute")
    assert "python" in mine["command"] or "pytest" in mine["command"]  # /proc/PID/cmdline: NVML gave no name
    assert elsewhere == {"pid": NOT_A_PID, "user": "?", "command": "?", "used_memory_mib": 512.0, "type": "compute"}
    # a failing query: that field empty and why, the rest of the GPU read
    assert g1["power_w"] is None and "power" in g1["errors"] and g1["sm_clock_mhz"] == 1500.0
    assert g1["throttle_reasons"] == ["sw_power_cap", "sw_thermal"]
    assert g1["processes"] == [
        {
            "pid": 1,
            "user": pwd.getpwuid(os.stat("/proc/1").st_uid).pw_name,
            "command": "Xorg",
            "used_memory_mib": 64.0,
            "type": "graphics",
        }
    ]
    # neither process list answers: null (not "none"), and why
    assert g2["processes"] is None and "processes" in g2["errors"] and g2["utilization_pct"] == 12.0


def test_a_process_on_both_lists_is_one_entry(box, capsys) -> None:
    nv = box(1)
    nv.compute[0] = {ME: 100.0}
    nv.graphics[0] = {ME: 120.0}
    code, out, _ = once(capsys, "--json")
    (proc,) = json.loads(out)["gpus"][0]["processes"]
    assert code == 0 and (proc["pid"], proc["type"], proc["used_memory_mib"]) == (ME, "compute+graphics", 120.0)


def test_gpus_option_picks_what_is_read(box, capsys) -> None:
    box(4)
    code, out, _ = once(capsys, "--json", "--gpus", "3,1")
    assert code == 0 and [g["index"] for g in json.loads(out)["gpus"]] == [3, 1]


def test_a_gpu_the_box_lacks_is_one_line_and_exit_2(box, capsys) -> None:
    box(2)
    code, out, err = once(capsys, "--gpus", "7")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "--gpus 7" in err


# -- --once: the table --------------------------------------------------------------------------------
def test_once_table_shows_each_gpu_and_its_processes(box, capsys) -> None:
    busy_box(box)
    code, out, err = once(capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "GPU 0 · Fake GPU 0 · GPU-0000-0"
    assert lines[1].startswith("  kernel-active 10% · SM 60% · tensor 40% · DRAM 20% · mem-bw 5% · memory 1.0/80.0 GiB")
    assert "· 100 W · 1400 MHz · 40°C" in lines[1]
    assert "throttle: none" in lines[1]
    assert lines[2].split() == ["PID", "USER", "GPU", "MEM", "COMMAND"]
    mine = next(line for line in lines if line.split()[0] == str(ME))
    assert MY_USER in mine and "1.50 GiB" in mine
    assert next(line for line in lines if line.split()[0] == str(NOT_A_PID)).split() == [
        str(NOT_A_PID),
        "?",
        "0.50",
        "GiB",
        "?",
    ]
    _, gpu1, gpu2 = out.split("\nGPU ")  # each GPU's lines
    assert "· n/a ·" in gpu1 and "throttle: sw_power_cap, sw_thermal" in gpu1 and "Xorg" in gpu1
    assert "n/a above: NVML failed (power:" in gpu1
    assert "processes: n/a (NVML: compute:" in gpu2 and "no processes" not in gpu2
    assert lines[-1] == "driver 555.42"


def test_a_gpu_without_processes_says_so(box, capsys) -> None:
    box(1)
    code, out, _ = once(capsys)
    assert code == 0 and "  no processes" in out.splitlines()


def test_a_command_cannot_reach_the_terminal_with_an_escape_sequence(box, capsys) -> None:
    nv = box(1)
    nv.compute[0] = {1: 1.0}
    nv.names[1] = "evil\x1b]0;pwned\x07 --flag\nnext"
    code, out, _ = once(capsys)
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    assert "evil]0;pwned --flag next" in out


# -- without NVML ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [["--once"], ["--once", "--json"]])
def test_without_nvml_once_is_one_line_and_exit_1(no_nvml, capsys, args: list[str]) -> None:
    code = cli.main(["watch", *args])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert (
        err
        == "gpudash watch: NVML unavailable: NVML library (libnvidia-ml) not found: no NVIDIA driver on this machine\n"
    )


def test_without_nvml_record_is_one_line_exit_1_and_no_file(no_nvml, capsys, tmp_path: Path) -> None:
    code = cli.main(["watch", "--record", str(tmp_path / "box.csv"), "--duration", "1"])
    _, err = capsys.readouterr()
    assert code == 1 and len(err.splitlines()) == 1 and "NVML unavailable" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--json"], "--json only applies with --once"),
        (["--duration", "5"], "--duration only applies with --record PATH"),
        (["--once", "--record", "x.csv"], "--once and --record: give one"),
        (["--once", "--theme", "nord"], "--theme is for the dashboard; it does not apply with --once"),
        (["--gpus", "a"], "--gpus"),
        (["--interval", "0"], "--interval"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(capsys, args: list[str], says: str) -> None:
    try:
        code = cli.main(["watch", *args])
    except SystemExit as exc:  # argparse's own refusal
        code = int(exc.code or 0)
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err


def test_record_refuses_an_existing_file_without_force(box, capsys, tmp_path: Path) -> None:
    box(1)
    path = tmp_path / "box.csv"
    path.write_text("keep me\n")
    code = cli.main(["watch", "--record", str(path)])
    _, err = capsys.readouterr()
    assert code == 2 and "exists" in err and path.read_text() == "keep me\n"


def test_once_imports_neither_textual_nor_torch() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gpudash", "watch", "--once", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    modules = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "gpudash.watch.once" in modules
    heavy = sorted(m for m in modules if m.split(".")[0] in ("textual", "torch", "textual_plotext", "rich"))
    assert heavy == []


# -- --record headless ---------------------------------------------------------------------------------
def test_record_writes_a_recording_that_replay_reads(box, tmp_path: Path, capsys) -> None:
    nv = box(2)
    path = tmp_path / "box.csv"
    code = run_watch_record(str(path), interval_s=0.05, duration_s=0.6)
    _, err = capsys.readouterr()
    assert code == 0, err
    meta = json.loads((tmp_path / "box.json").read_text())
    assert meta["recorded_by"] == "gpudash watch" and meta["gpus_sampled"] == [0, 1] and "config" not in meta
    assert read_sidecar(path).problem is None  # replay uses the metadata, not "ignored: …"
    source = ReplaySource(path)
    messages = read_all(source)
    ticks = [m for m in messages if isinstance(m, GpuSample)]
    assert source.bad_rows == 0 and len(ticks) >= 5 and len(ticks) == meta["rows"]
    assert [m for m in messages if not isinstance(m, GpuSample)] == []
    assert source.gpu_info.names == ("Fake GPU 0", "Fake GPU 1")
    last = ticks[-1]
    assert (last.gpu_util_pct, last.power_w, last.mem_bw_util_pct) == (10.0, 100.0, 5.0)  # the charted GPU 0
    assert [(r.index, r.gpu_util_pct, r.temp_c) for r in last.per_gpu] == [(0, 10.0, 40.0), (1, 11.0, 41.0)]
    assert nv.calls[1] > 0


def test_record_of_gpus_2_and_3_charts_gpu_2(box, tmp_path: Path, capsys) -> None:
    box(4)
    path = tmp_path / "box.csv"
    assert run_watch_record(str(path), interval_s=0.05, duration_s=0.3, gpus=(2, 3), quiet=True) == 0
    assert capsys.readouterr().err == ""
    ticks = [m for m in read_all(ReplaySource(path)) if isinstance(m, GpuSample)]
    assert ticks and ticks[-1].gpu_util_pct == 12.0 and [r.index for r in ticks[-1].per_gpu] == [2, 3]


FAKE_PYNVML = """\
import sys
sys.path.insert(0, {root!r})
from tests.fake_gpus import watch_box
_m = watch_box(2)
globals().update({{k: v for k, v in vars(_m).items() if not k.startswith("__")}})
"""


@pytest.mark.slow
def test_ctrl_c_loses_no_row(tmp_path: Path) -> None:
    """A real ``gpudash watch --record`` (over a fake ``pynvml`` module on its path), stopped by
    SIGINT: exit 130, every row whole, as many rows as the metadata counts, replay reads all."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "pynvml.py").write_text(FAKE_PYNVML.format(root=str(ROOT)))
    path = tmp_path / "box.csv"
    env = {**os.environ, "PYTHONPATH": f"{fake}{os.pathsep}{ROOT}"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.Popen(
        [*GPUDASH, "watch", "--record", str(path), "--interval", "0.05"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not path.exists() or path.read_text().count("\n") < 10):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    meta = json.loads((tmp_path / "box.json").read_text())
    text = path.read_text()
    assert text.endswith("\n") and text.count("\n") == meta["rows"] + 1  # the header and every row counted
    assert meta["status"] == "interrupted by SIGINT" and meta["exit_code"] == 130
    source = ReplaySource(path)
    assert len(read_all(source)) == meta["rows"] and source.bad_rows == 0


# -- serve ------------------------------------------------------------------------------------------------
def test_serve_watch_starts_watch_and_takes_no_workload(capsys) -> None:
    assert dashboard_command(["--gpus=0"], "watch").endswith("-m gpudash watch --gpus=0")
    code = cli.main(["serve", "--watch", "-w", "encdec"])
    _, err = capsys.readouterr()
    assert code == 2 and err.strip() == (
        "gpudash: error: -w/--workload does not apply to 'gpudash serve --watch' (it runs no workload)"
    )
