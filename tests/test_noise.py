"""Noise is visible: what makes a measurement noisy is read each second, stamped on each sample,
and said wherever a figure or a verdict is shown (the header, record's progress, the CSV,
sweep.md, report.md), and a verdict measured on a noisy machine is never coloured."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudash.core import procgroup
from gpudash.core.protocol import ExitCode, GpuSample, Sample
from gpudash.host.noise import NoiseProbe, gpu_reasons
from gpudash.recording import csvformat
from gpudash.recording.headless_report import progress_line
from gpudash.stats.noise_tally import NoiseTally
from gpudash.stats.segments import SegmentTracker

TICK = os.sysconf("SC_CLK_TCK")


class FakeProc:
    """A ``/proc`` of two CPUs written by the test: CPU time in clock ticks, run delay in ns."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.busy = [0, 0]  # ticks per CPU

    def write(self, *, busy: tuple[int, int], processes: dict[int, tuple[int, int]]) -> None:
        """``processes``: pid -> (CPU ticks, run-queue wait in ns)."""
        lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
        for i, ticks in enumerate(busy):
            lines.append(f"cpu{i} {ticks} 0 0 1000 0 0 0 0 0 0")
        (self.root / "stat").write_text("\n".join(lines) + "\n")
        for pid, (ticks, waited) in processes.items():
            d = self.root / str(pid)
            d.mkdir(exist_ok=True)
            # pid (comm with a space) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
            (d / "stat").write_text(f"{pid} (py thon) R 1 {pid} 1 0 0 0 0 0 0 0 {ticks} 0 0 0\n")
            (d / "schedstat").write_text(f"{ticks * 10**7} {waited} 5\n")


@pytest.fixture
def proc(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path)


def probe(proc: FakeProc, clock: list[float]) -> NoiseProbe:
    return NoiseProbe(proc=proc.root, cpus=(0, 1), own_pid=10, clock=lambda: clock[0], interval_s=1.0)


def one_second(proc: FakeProc, busy: tuple[float, float], processes: dict[int, tuple[float, int]]) -> str:
    """The reasons after one second in which the two CPUs were ``busy`` (CPU-seconds each) and each
    process (gpudash is pid 10, the rest are the workload) spent (CPU-seconds, ns waiting)."""
    clock = [0.0]
    p = probe(proc, clock)
    proc.write(busy=(0, 0), processes={pid: (0, 0) for pid in processes})
    members = [pid for pid in processes if pid != 10]
    assert p.read(lambda: members) == ""  # the first reading has nothing to compare with
    proc.write(
        busy=(int(busy[0] * TICK), int(busy[1] * TICK)),
        processes={pid: (int(cpu * TICK), waited) for pid, (cpu, waited) in processes.items()},
    )
    clock[0] = 1.0
    return p.read(lambda: members)


@pytest.mark.parametrize(
    ("busy", "processes", "reasons"),
    [
        # both CPUs busy the whole second, all of it gpudash (0.3) and its workload (1.7): not noise
        ((1.0, 1.0), {10: (0.3, 0), 20: (1.7, 0)}, ""),
        # the workload used 1 of the 2 busy CPU-seconds: others kept 1 CPU busy (50% of 2)
        ((1.0, 1.0), {10: (0.0, 0), 20: (1.0, 0)}, "host load: other processes kept 1.0 of 2 CPUs busy"),
        # a little background work (0.4 CPU, under half a CPU) is not host load
        ((1.0, 0.4), {10: (0.0, 0), 20: (1.0, 0)}, ""),
        # a loader worker (21) waited 0.3 s of the second on a run queue; the main process 0.01 s
        (
            (0.5, 0.0),
            {10: (0.0, 0), 20: (0.5, 10**7), 21: (0.0, 3 * 10**8)},
            "starved: the workload waited for a CPU 30% of the time",
        ),
        ((0.5, 0.0), {10: (0.0, 0), 20: (0.5, 4 * 10**7)}, ""),  # 4% of the time: under 5%
    ],
)
def test_the_cpu_reasons_and_their_thresholds(
    proc: FakeProc, busy: tuple[float, float], processes: dict[int, tuple[float, int]], reasons: str
) -> None:
    assert one_second(proc, busy, processes) == reasons


def test_the_reading_is_kept_between_rereads(proc: FakeProc) -> None:
    clock = [0.0]
    p = probe(proc, clock)
    proc.write(busy=(0, 0), processes={10: (0, 0)})
    p.read(lambda: [])
    proc.write(busy=(TICK, TICK), processes={10: (0, 0)})
    clock[0] = 1.0
    noisy = p.read(lambda: [])
    assert noisy.startswith("host load")
    proc.write(busy=(TICK, TICK), processes={10: (0, 0)})  # quiet since, but not reread yet
    clock[0] = 1.5
    asked: list[int] = []

    def listing() -> list[int]:
        asked.append(1)
        return []

    assert p.read(listing) == noisy and not asked  # nor the group listed
    clock[0] = 2.0
    assert p.read(lambda: []) == ""


def test_without_proc_only_the_gpu_is_read(tmp_path: Path) -> None:
    clock = [0.0]
    p = NoiseProbe(proc=tmp_path / "none", cpus=(0,), own_pid=1, clock=lambda: clock[0])
    p.read(lambda: [5])
    clock[0] = 2.0
    throttled = GpuSample(time_s=2.0, throttle="sw_power_cap|hw_thermal")
    assert p.read(lambda: [5], throttled) == "GPU throttled: hw_thermal"


def test_other_processes_on_the_gpu_and_throttling() -> None:
    assert gpu_reasons(GpuSample(time_s=0, gpu_pids=(100, 200, 300)), [100]) == [
        "GPU shared: 2 other processes on the workload's GPU"
    ]
    assert gpu_reasons(GpuSample(time_s=0, gpu_pids=(100,)), [100]) == []
    # a container: NVML names host pids, none of them the workload's; one of them is
    assert gpu_reasons(GpuSample(time_s=0, gpu_pids=(7001, 7002)), [100]) == [
        "GPU shared: 1 other process on the workload's GPU"
    ]
    assert gpu_reasons(GpuSample(time_s=0, gpu_pids=(7001,)), [100]) == []
    # the software power cap is the configuration's own power draw setting the clock: not noise
    assert gpu_reasons(GpuSample(time_s=0, throttle="sw_power_cap"), []) == []
    assert gpu_reasons(GpuSample(time_s=0, throttle="hw_slowdown|sw_thermal"), []) == [
        "GPU throttled: hw_slowdown, sw_thermal"
    ]
    assert gpu_reasons(None, []) == []


def _spin_on(cpu: int) -> subprocess.Popen[bytes]:
    """A process of its own group that spins on ``cpu``."""
    code = f"import os\nos.setpgrp()\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    return subprocess.Popen([sys.executable, "-c", code])


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs Linux's /proc with schedstat")
def test_a_real_workload_sharing_its_cpu_with_two_spinners_is_starved_and_loaded() -> None:
    """The real ``/proc``: the workload and two spinners pinned to one CPU. Whatever else the
    machine runs only adds to it, so the reasons are there under any load."""
    cpu = min(os.sched_getaffinity(0))
    workload, hogs = _spin_on(cpu), [_spin_on(cpu) for _ in range(2)]
    try:
        p = NoiseProbe(cpus=(cpu,), interval_s=0.5)
        deadline, reasons = time.monotonic() + 30, ""
        while time.monotonic() < deadline and not ("host load" in reasons and "starved" in reasons):
            reasons = p.read(lambda: procgroup.members(workload.pid))
            time.sleep(0.2)
        assert "host load: other processes kept" in reasons and "of 1 CPUs busy" in reasons
        assert "starved: the workload waited for a CPU" in reasons
    finally:
        for proc in (workload, *hogs):
            proc.kill()
            proc.wait()


# -- the tally and where it is shown ------------------------------------------------------------------
def _sample(t: float, noise: str = "", rate: float = 10.0) -> Sample:
    return Sample(
        time_s=t,
        workload="sync_loss",
        variant="fixed",
        batch_size=4,
        steps=int(rate * t),
        samples=int(4 * rate * t),
        interval_s=0.5,
        steps_per_s=rate,
        samples_per_s=4 * rate,
        step_ms_p50=None,
        step_ms_p95=None,
        syncs_per_step=None,
        noise=noise,
    )


def test_the_tally_says_how_much_was_noisy_and_why() -> None:
    tally = NoiseTally()
    for noise in ["", "host load: x", "host load: y; starved: z", "", "", "", "", "", "", ""]:
        tally.add(noise)
    assert tally.share == pytest.approx(0.2) and tally.is_noisy
    assert tally.note() == "noisy: 20% of samples (host load, starved)"
    quiet = NoiseTally()
    for noise in ["host load: x"] + [""] * 10:  # 1 in 11: below 10%
        quiet.add(noise)
    assert not quiet.is_noisy and quiet.note() == ""
    both = tally + quiet
    assert (both.samples, both.noisy) == (21, 3) and both.reasons["host load"] == 3


def test_the_noise_column_round_trips_and_the_summary_row_says_the_share() -> None:
    tracker = SegmentTracker()
    samples = [_sample(0.5 * i, "host load: others kept 1.2 of 2 CPUs busy" if i % 2 else "") for i in range(1, 9)]
    rows = []
    for s in samples:
        tracker.on_sample(s)
        rows.append(csvformat.sample_row(s, None))
    parser = csvformat.RowParser(csvformat.header())
    read_back = [parser.messages(r)[-1] for r in rows]
    assert [m.noise if isinstance(m, Sample) else m for m in read_back] == [s.noise for s in samples]
    seg = tracker.current
    assert seg is not None
    summary = dict(zip(csvformat.header(), csvformat.summary_row(seg, 4.0), strict=True))
    assert summary["noise"].startswith("noisy: ") and "(host load)" in summary["noise"]
    assert "noisy: " in summary["event_message"]  # the summary in words says it too


def test_an_old_recording_without_the_noise_column_reads_as_quiet() -> None:
    header = [c for c in csvformat.header() if c != "noise"]
    row = [cell for c, cell in zip(csvformat.header(), csvformat.sample_row(_sample(1.0), None), strict=True)]
    row = [cell for c, cell in zip(csvformat.header(), row, strict=True) if c != "noise"]
    (msg,) = csvformat.RowParser(header).messages(row)
    assert isinstance(msg, Sample) and msg.noise == ""


def test_record_progress_says_the_machine_is_noisy() -> None:
    tracker = SegmentTracker()
    s = _sample(1.0, "starved: the workload waited for a CPU 37% of the time")
    tracker.on_sample(s)
    line = progress_line(s, tracker.current, 1.0)
    assert line.endswith(" · ⚠ noisy: starved: the workload waited for a CPU 37% of the time")
    assert "noisy" not in progress_line(_sample(1.0), tracker.current, 1.0)


# -- sweep.md and report.md ---------------------------------------------------------------------------
def _noisy_recording(path: Path, variant: str, noise: str) -> Path:
    """The synthetic encdec recording of ``test_report_ab``, every sample stamped ``noise``."""
    import dataclasses

    from gpudash.core.protocol import RunConfig
    from gpudash.recording.metadata import run_metadata
    from gpudash.recording.record import CsvRecorder
    from gpudash.tui.demo import SyntheticSource

    t = [0.0]
    src = SyntheticSource(RunConfig(workload="encdec", variant=variant), gpu=True, clock=lambda: t[0], startup_s=1.0)
    rec = CsvRecorder(str(path), run_metadata(src.config, src.gpu_info, device="cuda:0"))
    src.start()
    while t[0] < 20.0:
        t[0] = round(t[0] + 0.25, 2)
        for m in src.poll():
            rec.on_message(dataclasses.replace(m, noise=noise) if isinstance(m, Sample) else m)
    rec.close()
    return path


def test_report_says_which_runs_were_noisy_and_marks_their_verdicts(tmp_path: Path, capsys) -> None:
    from tests.printed import table_rows
    from tests.test_report import run

    a = _noisy_recording(tmp_path / "serial.csv", "serial", "")
    b = _noisy_recording(tmp_path / "pipelined.csv", "pipelined", "GPU shared: 1 other process on the workload's GPU")
    assert run(["report", str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    noise = md.split("## Noise", 1)[1].split("\n## ", 1)[0]
    assert "⚠ **The machine was noisy** while 1 of 2 configurations were measured" in noise
    assert "- encdec/pipelined bs8 (pipelined.csv): noisy: 100% of samples (GPU shared)" in noise
    (row,) = table_rows(md, "## Between runs")
    assert row[-1] == "faster ⚠ noisy"
    assert "faster (⚠ noisy)" in capsys.readouterr().err
    # both quiet: the section says what was looked at and that nothing was noisy
    assert run(["report", str(a), "--out", str(tmp_path / "quiet")]) == 0
    quiet = (tmp_path / "quiet" / "report.md").read_text()
    assert "Nothing was noisy while these were measured." in quiet and "⚠" not in quiet


def test_sweep_md_marks_a_verdict_measured_on_a_noisy_machine_and_its_bar_is_not_coloured(tmp_path: Path) -> None:
    import dataclasses

    from gpudash.sweep.plan import Configuration, FamilyPlan, SweepPlan, SweepSettings
    from gpudash.sweep.plot import VERDICT_COLOURS
    from gpudash.sweep.report import SweepReport
    from gpudash.sweep.results import summarize
    from tests.test_sweep import repeat_result

    base = Configuration("sync_loss", "sync-heavy", "sync-heavy", 4, 0)
    fixed = Configuration("sync_loss", "fixed", "fixed", 4, 1)
    noisy = repeat_result(fixed, 1, 75.0, 10.0)
    noisy = dataclasses.replace(noisy, samples=tuple(dataclasses.replace(s, noise="starved: x") for s in noisy.samples))
    results = [repeat_result(base, 1, 50.0, 0.0), noisy]
    (quiet_base, loud) = summarize((base, fixed), results)
    assert quiet_base.noise == "" and loud.noise == "noisy: 100% of samples (starved)"
    assert loud.comparison is not None and str(loud.comparison.verdict) == "faster"
    fp = FamilyPlan("sync_loss", "Host-device syncs", (base, fixed), seconds=5.0)
    report = SweepReport(SweepPlan((fp,), SweepSettings(repeats=1), tmp_path, "gpudash sweep"))
    for r in results:
        report.add_result(r)
    report.add_family(fp, results, [])
    report.finish("done", ExitCode.OK)
    md = (tmp_path / "sweep.md").read_text()
    assert "- **⚠ The machine was noisy** while 1 of 2 configurations were measured (see Noise)" in md
    assert "| faster ⚠ noisy |" in md and "- sync_loss/fixed bs4: noisy: 100% of samples (starved)" in md
    rows = {r["variant"]: r for r in _sweep_rows(tmp_path) if r["row_kind"] == "summary"}
    assert rows["fixed"]["noise"] == "noisy: 100% of samples (starved)" and rows["sync-heavy"]["noise"] == ""
    svg = (tmp_path / "sweep.svg").read_text()
    assert VERDICT_COLOURS["faster"] not in svg.lower()  # a real difference on a noisy machine: no green


def _sweep_rows(out: Path) -> list[dict[str, str]]:
    import csv

    with open(out / "sweep.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs Linux's /proc with schedstat")
def test_an_a_a_sweep_on_a_loaded_cpu_says_so_and_shows_no_ratio_without_an_interval_nor_colour(tmp_path: Path) -> None:
    """The issue's A/A check on a loaded CPU: the sweep and its workload pinned to one CPU that
    two spinners share. Whatever else the machine runs only adds load."""
    from gpudash.sweep.plot import VERDICT_COLOURS
    from tests import printed
    from tests.helpers import timing
    from tests.test_sweep import run

    cpu = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    hogs = [_spin_on(cpu) for _ in range(2)]
    try:
        os.sched_setaffinity(0, {cpu})  # the sweep's workload process inherits it
        out = tmp_path / "aa"
        aa = ["sweep", "-w", "sync_loss", "-v", "fixed,fixed", "-b", "2", *timing(2, 0.5, 0.2), "-q", "--out", str(out)]
        assert run(aa) == 0
    finally:
        os.sched_setaffinity(0, before)
        for hog in hogs:
            hog.kill()
            hog.wait()
    md = (out / "sweep.md").read_text()
    assert "⚠ The machine was noisy" in md and "host load" in md
    (row,) = [printed.cells(line) for line in md.splitlines() if line.startswith("| fixed#2 |")]
    ratio, (_, _, noisy) = printed.compared(row[-2]), printed.verdict(row[-1])
    assert ratio is not None and (ratio.has_interval or row[-2].endswith("(no CI)")), row  # it says its interval
    assert noisy, row
    svg = (out / "sweep.svg").read_text().lower()
    assert VERDICT_COLOURS["faster"] not in svg and VERDICT_COLOURS["slower"] not in svg


@pytest.mark.slow
def test_a_jobs_samples_say_the_machine_was_busy_beside_it(tmp_path: Path) -> None:
    """A user's job recorded while a busy loop holds each CPU this process may use: its sample rows
    carry the reason (the job's own processes are its whole tree, not what competes with it)."""
    import csv

    from tests.test_job import PLAIN, gpudash

    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(len(os.sched_getaffinity(0)))]
    try:
        path = tmp_path / "run.csv"
        job = ["python", PLAIN, "--steps", "300", "--workers", "0"]
        done = gpudash("record", str(path), "--", *job, timeout=240)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert done.returncode == 0, done.stderr
    with open(path, newline="") as f:
        noise = [r["noise"] for r in csv.DictReader(f) if r["row_kind"] == "sample"]
    assert any(n.startswith(("host load", "starved")) for n in noise), noise
