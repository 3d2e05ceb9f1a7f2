"""The dashboard's run controller, without Textual: what each key does to the run (the knobs':
tests/test_controller_knobs.py)."""

from __future__ import annotations

import subprocess
import sys

from gpudash.core.protocol import Event, EventKind, RunConfig, SetBatchSize, SetKnobs, SetVariant
from gpudash.core.running import Running
from gpudash.core.trace_note import TraceNote
from gpudash.tui.controller import DashController, Severity
from gpudash.tui.state import Status
from tests.messages import present
from workloads.knobs import Knobs
from workloads.registry import family

from .tui.fakes import NO_GPU, FakeSource, run_segment


def running(
    workload: str = "encdec", variant: str = "serial", device: str = "cuda:0", batch: int = 8
) -> tuple[DashController, FakeSource]:
    src = FakeSource(RunConfig(workload=workload), gpu_info=NO_GPU if device == "cpu" else FakeSource().gpu_info)
    ctl = DashController(src)
    src.start()
    src.push(
        Event(1.0, EventKind.STARTED, message="started", running=Running(workload, variant, batch, device=device)),
        *run_segment(1.0, 3.0, 100.0, workload=workload, variant=variant, batch=batch),
    )
    ctl.source_started()
    return ctl, src


def test_the_controller_never_imports_textual_or_torch() -> None:
    code = (
        "import sys, gpudash.tui.controller\n"
        "assert 'textual' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_status_and_what_runs_come_from_the_events_only() -> None:
    ctl, src = running(device="cpu", batch=4)
    s = ctl.state
    assert (s.status, s.run.workload, s.run.variant, s.run.batch_size, s.device) == (
        Status.RUNNING,
        "encdec",
        "serial",
        4,
        "cpu",
    )
    src.push(
        Event(3.0, EventKind.CHANGED, "batch_size", "4", "8", running=Running("encdec", "serial", 8, device="cpu"))
    )
    src.push(Event(4.0, EventKind.CRASHED, message="killed by SIGKILL"))
    notices = ctl.poll()
    assert s.run.batch_size == 8 and s.status == Status.CRASHED and s.ended
    assert notices[-1].severity == Severity.ERROR and "press r to restart" in notices[-1].text
    assert ctl.begin_restart() is not None and s.status == Status.STARTING


def test_pipelining_on_the_cpu_is_refused_with_the_catalogs_message() -> None:
    ctl, src = running(device="cpu")
    notice = ctl.requests.toggle_pipeline()
    assert src.sent == []
    assert present(family("encdec").variant("pipelined").refusal("cpu")) in notice.text
    assert notice.severity == Severity.ERROR and notice.toast


def test_a_workload_of_your_own_pipelines_through_the_same_keys() -> None:
    """``p`` on ``-w mine.py:workload``: on the CPU refused with the catalog's reason; on a GPU sent
    (the workload process then says whether the file has a frozen stage)."""
    from tests.helpers import ROOT

    spec = f"{ROOT / 'examples' / 'frozen_trunk.py'}:workload"
    ctl, src = running(spec, device="cpu")
    notice = ctl.requests.toggle_pipeline()
    assert src.sent == [] and "needs CUDA streams" in notice.text and notice.severity == Severity.ERROR
    ctl, src = running(spec, device="cuda:0")
    ctl.requests.toggle_pipeline()
    assert src.sent == [SetVariant("pipelined")]


def test_next_variant_skips_what_the_device_cannot_run_and_says_so() -> None:
    ctl, src = running("augment", "gpu-vectorized", device="cpu")
    notice = ctl.requests.next_variant()
    assert src.sent == [SetVariant("cpu")]  # past pipelined and pipelined-loop, around to the first
    assert "skipped pipelined, pipelined-loop: needs CUDA" in notice.text
    ctl, src = running("augment", "gpu-vectorized", device="cuda:0")
    ctl.requests.next_variant()
    assert src.sent == [SetVariant("pipelined")]


def test_batch_keys_build_on_the_size_asked_for_until_the_engine_answers() -> None:
    ctl, src = running(batch=8)
    ctl.requests.scale_batch(double=True)
    ctl.requests.scale_batch(double=True)
    assert src.sent == [SetBatchSize(16), SetBatchSize(32)]
    src.push(Event(3.5, EventKind.ERROR, "batch_size", "8", "32", "CUDA out of memory"))
    ctl.poll()
    assert ctl.pending_batch is None
    ctl.requests.scale_batch(double=False)
    assert src.sent[-1] == SetBatchSize(4)


def test_the_stages_key_asks_a_two_stage_family_only() -> None:
    from gpudash.core.protocol import TimeStages

    ctl, src = running("encdec", device="cuda:0")
    ctl.requests.time_stages()
    assert src.sent == [TimeStages()]
    ctl, src = running("sync_loss", "fixed", device="cuda:0")
    assert "no two stages" in ctl.requests.time_stages().text and src.sent == []
    src.push(
        Event(3.0, EventKind.MEASURED, "stages", message="encode 1 ms, train 3 ms alone: overlap bound 333 steps/s")
    )
    assert ctl.poll()[-1].text.startswith("encode 1 ms")


def test_next_variant_from_an_unknown_variant_offers_every_one() -> None:
    ctl, src = running("input_pipeline", "baseline", device="cpu")
    # as after a replayed file from another version: a change to a variant this version lacks
    src.push(Event(4.0, EventKind.CHANGED, "variant", "baseline", "bogus"))
    ctl.poll()
    assert ctl.state.run.variant == "bogus"
    ctl.requests.next_variant()
    assert src.sent == [SetVariant("baseline")]


def test_a_replay_is_read_only() -> None:
    from gpudash.core.protocol import SourceInfo

    class Recording(FakeSource):
        @property
        def info(self) -> SourceInfo:
            return SourceInfo(replay=True, path="run.csv")

    ctl = DashController(Recording())
    assert not ctl.enabled("pause_resume", steers=True) and ctl.enabled("help", steers=False)
    assert ctl.requests.pause_resume().text == "replay: read-only"
    assert ctl.knobs.toggle("channels_last").text == "replay: read-only"
    assert ctl.status_text() == "replay (read-only)"


# -- profiler windows (T) --------------------------------------------------------------------------
TRACE_PATH = "/runs/gpudash-traces/gpudash-trace-20250101-120000-t00012.34-encdec-pipelined-b8.json.gz"


def trace_event(t: float = 13.0, gpu: bool = True, path: str = TRACE_PATH) -> Event:
    """A profiler window's answer as the engine sends it (gpudash.engine.measure_windows.trace_window)."""
    figures: dict[str, float] = {}
    if gpu:
        figures.update(
            gpu_busy_pct=72.2,
            idle_pct=27.8,
            overlap_pct=31.4,
            kernels_per_step=145,
            launch_delay_us=12.5,
            memcpy_pct=3.1,
            stream_7_busy_pct=60,
        )
        summary = "20 steps traced, 20 ms/step: GPU busy 72.2%, idle 27.8%, overlap 31.4% of busy, 145 kernels/step"
    else:
        summary = "20 steps traced, 20 ms/step; GPU figures need CUDA"
    running = Running("encdec", "pipelined", 8, device="cuda:0")
    note = TraceNote(path, 20, 400.0, 12.34, figures)
    return Event(t, EventKind.MEASURED, "trace", message=f"{summary} → {path}", data=note, running=running)


def traced(workload: str = "encdec", device: str = "cuda:0", trace_dir: str | None = "/runs/gpudash-traces"):
    import dataclasses

    ctl, src = running(workload, device=device)
    ctl.config = src.config = dataclasses.replace(src.config, trace_dir=trace_dir)
    return ctl, src


def test_the_profile_key_sends_one_window_and_says_so() -> None:
    from gpudash.core.protocol import TraceWindow

    ctl, src = traced()
    notice = ctl.requests.trace_window()
    assert src.sent == [TraceWindow(20)] and notice.severity == Severity.INFO
    assert notice.text.startswith("profiling 20 steps…") and "/runs/gpudash-traces" in notice.text
    again = ctl.requests.trace_window()  # one window at a time
    assert src.sent == [TraceWindow(20)] and "already under way" in again.text
    notices = ctl.ingest([trace_event()])
    assert not ctl.pending_trace
    (n,) = notices
    assert "open in ui.perfetto.dev" in n.text and TRACE_PATH in n.text and "GPU busy 72.2%" in n.text
    assert n.toast
    import os

    here = os.path.join(os.getcwd(), "gpudash-traces", "gpudash-trace-x.json.gz")  # the dashboard's default place
    (n,) = ctl.ingest([trace_event(path=here)])
    assert n.text.startswith("open in ui.perfetto.dev: gpudash-traces/gpudash-trace-x.json.gz — 20 steps traced")
    ctl.requests.trace_window()
    assert src.sent == [TraceWindow(20), TraceWindow(20)]
    ctl.ingest([Event(20.0, EventKind.ERROR, "trace", message="profiler window failed: CUPTI unavailable")])
    assert not ctl.pending_trace  # a failed window can be asked for again


def test_the_figures_stay_in_one_line_and_the_window_is_marked() -> None:
    ctl, _ = traced()
    assert ctl.last_trace_text() is None
    ctl.ingest([trace_event()])
    assert ctl.last_trace_text() == "last trace: GPU busy 72%, idle 28%, overlap 31%, 145 kernels/step (t=12.3 s)"
    marker = ctl.state.markers[-1]
    assert (marker.label, marker.kind, marker.time_s) == ("trace", "measured", 12.34)  # the window's start
    ctl.ingest([Event(14.0, EventKind.MEASURED, "stages", message="encode 1 ms, train 3 ms alone")])
    assert ctl.state.markers[-1] is marker  # the stage timing has no marker
    cpu, _ = traced("sync_loss", device="cpu")
    cpu.ingest([trace_event(gpu=False)])
    assert cpu.last_trace_text() == "last trace: 20 steps, 20 ms/step; GPU figures need CUDA (t=12.3 s)"


def test_no_profiler_window_without_a_trace_directory_or_in_a_replay() -> None:
    from gpudash.core.protocol import SourceInfo

    ctl, src = traced(trace_dir=None)
    notice = ctl.requests.trace_window()
    assert src.sent == [] and notice.severity == Severity.WARNING and "no trace directory" in notice.text

    class Recording(FakeSource):
        @property
        def info(self) -> SourceInfo:
            return SourceInfo(replay=True, path="run.csv")

    recording = Recording(RunConfig(trace_dir="/runs/t"))
    replay = DashController(recording)
    assert "replay: read-only" in replay.requests.trace_window().text and recording.sent == []
    replay.ready = True
    (n,) = replay.ingest([trace_event()])  # a recorded window: its figures and where its file was
    assert "ui.perfetto.dev" in n.text and not n.toast and replay.last_trace_text()


def test_a_tuned_winner_is_applied_as_its_variant_batch_and_knobs_then_the_run_resumes(tmp_path) -> None:
    from gpudash.core.protocol import Pause, Resume
    from gpudash.tune.job import answer_from

    ctl, src = running(workload="sync_loss", variant="sync-heavy", device="cuda:0", batch=8)
    ctl.knobs.ask_all(Knobs({"amp": "bf16"}))  # running knobs go off before the variant changes
    ctl.send(Pause(), "pausing for the tune…")
    src.push(Event(3.5, EventKind.PAUSED, message="paused"))
    ctl.poll()
    answer = answer_from(
        {
            "winner": "fixed+channels_last+tf32",
            "variant": "fixed",
            "knobs": "channels_last=on,tf32=on",
            "batch_size": 32,
            "samples_per_s": {"mean": 512.0, "low": 500.0, "high": 524.0},
            "command": "gpudash -w sync_loss -v fixed -b 32 --knob channels_last --knob tf32",
            "vs_plain": {"base": "sync-heavy", "ratio": 1.8, "low": 1.7, "high": 1.9, "verdict": "faster"},
        },
        tmp_path,
    )
    assert answer.lines[0] == "fastest: fixed+channels_last+tf32 at batch 32: 512 ± 12 samples/s"
    assert answer.lines[1] == "vs the plain variant (sync-heavy): 1.80× [1.70–1.90], faster"
    del src.sent[:]
    ctl.tune.apply(answer)
    assert src.sent == [
        SetKnobs("none"),
        SetVariant("fixed"),
        SetBatchSize(32),
        SetKnobs("channels_last=on,tf32=on"),
        Resume(),
    ]


def test_tune_is_refused_in_a_replay_and_on_a_data_parallel_run() -> None:
    ctl, _ = running()
    ctl.config = RunConfig(workload="encdec", nproc=2)
    assert "2 ranks" in present(ctl.tune.refusal()).text
    from gpudash.core.protocol import SourceInfo

    class Recording(FakeSource):
        @property
        def info(self) -> SourceInfo:
            return SourceInfo(replay=True, path="run.csv")

    assert present(DashController(Recording()).tune.refusal()).text == "replay: read-only — tune needs a live run"


def test_the_ranks_line_names_the_straggler_by_its_own_work() -> None:
    """Issue 63: the ranks' step times agree (each waits for the others), so the ranks line names the
    straggler by each rank's own work over its latest windows; by step time only where none is known."""
    import dataclasses

    from gpudash.core.protocol import RankSample

    ctl, src = running()
    last = present(ctl.state.last_sample)
    src.push(dataclasses.replace(last, time_s=3.1, world_size=3, slowest_rank=0, slowest_rank_step_ms=21.7))
    ctl.poll()
    assert "3 ranks (DDP) · slowest rank 0: 21.7 ms/step p50" == ctl.ranks_text()  # no own work: by step time

    def windows(own: dict[int, float], start: float, n: int = 5) -> None:
        for i in range(n):
            for rank, ms in own.items():
                w = ms * (1 + 0.01 * ((i + rank) % 3 - 1))
                src.push(RankSample(start + i, rank, 100, 46.0, 21.7, node=0, own_ms=w, comm_ms=21.7 - w))
        ctl.poll()

    windows({0: 2.5, 1: 19.0, 2: 2.5}, 4.0, n=4)  # four windows: too few to judge
    assert "slowest rank 0" in present(ctl.ranks_text()) and "straggler" not in present(ctl.ranks_text())
    windows({0: 2.5, 1: 19.0, 2: 2.5}, 8.0, n=1)
    assert "3 ranks (DDP) · ms/step p50 (all-reduce exposed): r0 21.7, r1 21.7, r2 21.7 · " in present(ctl.ranks_text())
    assert present(ctl.ranks_text()).endswith(" · straggler rank 1: own work 19 ms vs 2.5 ms")
    src.push(Event(9.0, EventKind.CHANGED, "batch_size", "8", "16"))  # another configuration: its own work
    windows({0: 2.5, 1: 2.5, 2: 2.5}, 10.0, n=20)
    assert present(ctl.ranks_text()).endswith(" · no straggler (own work within 3%)")
    assert "slowest" not in present(ctl.ranks_text())


def test_the_memory_key_records_two_steps_on_a_gpu_and_says_why_not_on_the_cpu() -> None:
    from gpudash.core.protocol import MEMORY_PEAK, MemoryPeak

    ctl, src = running(device="cuda:0")
    notice = ctl.requests.memory_peak()
    assert src.sent == [MemoryPeak(2)] and notice.text == "recording the GPU's allocations over 2 steps…"
    answer = "peak allocated 22.8 GiB in the recorded steps; the most: gpt.py:30 att = F.softmax(att, dim=-1) 4.5 GiB"
    (n,) = ctl.ingest([Event(9.0, EventKind.MEASURED, MEMORY_PEAK, message=answer)])
    assert n.text == f"memory: {answer}" and n.toast  # asked for by a key: answered where it is seen
    cpu, cpu_src = running(device="cpu")
    said = cpu.requests.memory_peak()
    assert cpu_src.sent == [] and said.severity == Severity.WARNING and "needs CUDA" in said.text
    job = DashController(FakeSource(RunConfig(workload="job:train.py", job=("python", "train.py"))))
    assert job.applies("memory_peak", True) and not job.applies("batch_double", True)  # a job's key too


def test_the_diagnosis_key_says_which_steps_are_profiled_a_jobs_on_the_cpu_too() -> None:
    from gpudash.core.protocol import Diagnose

    family, _ = running(device="cpu")  # a reference workload on the CPU: timed steps alone
    assert family.requests.diagnose().text == "diagnosing: 30 steps timed…"
    src = FakeSource(RunConfig(workload="job:train.py", job=("python", "train.py")), gpu_info=NO_GPU)
    job = DashController(src)
    src.start()
    src.push(Event(1.0, EventKind.STARTED, message="started", running=Running("job:train.py", "", 8, device="cpu")))
    job.source_started()
    job.ingest(src.poll())
    assert job.requests.diagnose().text == "diagnosing: 30 steps timed, 30 more under the profiler…"
    assert src.sent == [Diagnose()]
