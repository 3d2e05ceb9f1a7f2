"""Knobs on the CPU: the catalog's refusals, what each applicable knob trains, live changes in
the step loop (events, samples, warm-up out of the window), and the CLI and CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from gpudash.core.protocol import Control, Event, EventKind, Message, Sample, SetKnob, SetKnobs
from gpudash.engine.loop import StepLoop
from tests.helpers import gpudash_in_bare_env as _gpudash
from tests.helpers import record_rows
from tests.messages import present
from workloads.base import Workload, WorkloadOptions
from workloads.catalog_types import WorkloadError
from workloads.encdec import EncDecWorkload
from workloads.factory import build
from workloads.knobs import KNOBS, Knobs, knob, parse_knob, parse_knobs
from workloads.registry import FAMILIES
from workloads.sync_loss import SyncLossWorkload

ROOT = Path(__file__).resolve().parent.parent


# -- the catalog --------------------------------------------------------------------------------
def test_knob_text_round_trips_in_catalog_order() -> None:
    k = parse_knobs("cuda_graph,amp=bf16")
    assert k.text() == "amp=bf16,cuda_graph=on"
    assert parse_knobs(k.text()) == k
    assert parse_knobs("none") == Knobs() and Knobs().text() == "none"
    assert k.with_value("amp", "off").text() == "cuda_graph=on"
    assert parse_knob("compile") == ("compile", "default")


@pytest.mark.parametrize("text", ["nope", "amp=fp8", "compile=fast", "channels_last=yes"])
def test_bad_knobs_are_one_line_errors_naming_the_choices(text: str) -> None:
    with pytest.raises(WorkloadError) as err:
        parse_knob(text)
    assert "\n" not in str(err.value) and ("choose one of" in str(err.value) or "takes one of" in str(err.value))


def test_cuda_only_knobs_are_refused_on_the_cpu_with_the_reason() -> None:
    serial = FAMILIES["encdec"].variant("serial")
    for name in ("cudnn_benchmark", "tf32", "cuda_graph"):
        why = knob(name).refusal(serial, "cpu", Knobs())
        assert why is not None and "needs CUDA" in why
    for name in ("amp", "channels_last", "compile"):
        assert knob(name).refusal(serial, "cpu", Knobs()) is None


@pytest.mark.parametrize(
    ("name", "variant"), [("sync_loss", "sync-heavy"), ("augment", "gpu"), ("augment", "pipelined-loop")]
)
def test_cuda_graph_refuses_variants_that_sync_the_host(name: str, variant: str) -> None:
    why = knob("cuda_graph").refusal(FAMILIES[name].variant(variant), "cuda", Knobs())
    assert why is not None and "sync-free" in why and variant in why


def test_cuda_graph_and_compile_exclude_each_other() -> None:
    fixed = FAMILIES["sync_loss"].variant("fixed")
    assert "reduce-overhead" in present(parse_knobs("cuda_graph,compile").refusal(fixed, "cuda"))
    assert parse_knobs("cuda_graph,amp=bf16,channels_last").refusal(fixed, "cuda") is None


def test_a_refused_knob_leaves_the_running_workload_as_it_was() -> None:
    with build("sync_loss", "cpu", WorkloadOptions(variant="fixed")) as w:
        with pytest.raises(WorkloadError, match="needs CUDA"):
            w.set_knob("cuda_graph", "on")
        assert w.knobs == Knobs()
        w.step()
        assert torch.isfinite(present(w.last_loss))


# -- what a knob trains -------------------------------------------------------------------------
def _trained(name: str, variant: str, knobs: str, steps: int = 4) -> tuple[torch.Tensor, torch.Tensor | None]:
    with build(name, "cpu", WorkloadOptions(variant=variant, seed=5, knobs=parse_knobs(knobs))) as w:
        for _ in range(steps):
            w.step()
        flat = torch.cat([p.detach().double().flatten() for p in w.trained_parameters()])
        return flat, None if w.last_loss is None else w.last_loss.detach().double()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


YOURS = [  # gpudash.api
    *(f"{ROOT / 'examples' / name}:workload" for name in ("mine.py", "frozen_trunk.py")),
    f"{ROOT / 'examples' / 'with_loader.py'}:train",
]
CPU_CASES = [
    *(("encdec", "serial"), ("sync_loss", "fixed"), ("augment", "gpu-vectorized")),
    *((spec, "serial") for spec in YOURS),
]


@pytest.mark.parametrize(("name", "variant"), CPU_CASES)
def test_channels_last_trains_the_same_parameters(name: str, variant: str) -> None:
    plain, _ = _trained(name, variant, "none")
    tuned, loss = _trained(name, variant, "channels_last")
    assert torch.isfinite(present(loss)) and _rel(tuned, plain) < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize(("name", "variant"), CPU_CASES)
def test_bf16_autocast_stays_within_its_tolerance(name: str, variant: str) -> None:
    """bf16 keeps 8 bits of mantissa in forward and loss: 2% of the parameters' change at most."""
    start, _ = _trained(name, variant, "none", steps=0)
    plain, _ = _trained(name, variant, "none")
    tuned, loss = _trained(name, variant, "amp=bf16")
    assert torch.isfinite(present(loss))
    assert _rel(tuned, plain) < 2e-2
    assert float((tuned - plain).norm()) < 0.5 * float((plain - start).norm()), "bf16 undid the training"


def test_amp_runs_forward_in_bf16_and_keeps_fp32_weights() -> None:
    with build("encdec", "cpu", WorkloadOptions(knobs=parse_knobs("amp=bf16"))) as w:
        assert isinstance(w, EncDecWorkload)
        features, _ = w.encode(*w._peek_input())
        assert features.dtype == torch.bfloat16
        w.step()
        assert all(p.dtype == torch.float32 for p in w.trained_parameters())


@pytest.mark.slow
def test_compile_warms_up_without_training_and_trains_the_same_parameters() -> None:
    """sync_loss has SGD momentum: the warm-up's step is undone, buffers included (restore_point)."""
    plain, _ = _trained("sync_loss", "fixed", "none")
    tuned, loss = _trained("sync_loss", "fixed", "compile")
    assert torch.isfinite(present(loss)) and _rel(tuned, plain) < 1e-5


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune"])
def test_compile_keeps_the_layout_per_call_with_what_its_mode_sets(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``compile=<mode>`` compiles with what ``mode=`` would set plus layout_optimization off, per
    call (the backward, compiled later, too): inductor's process-wide config stays as it was."""
    import torch._inductor.config as inductor_config

    from workloads.tuning import ModuleKnobs

    calls: list[dict[str, Any]] = []

    def compile_recorded(module: torch.nn.Module, **kw: Any) -> torch.nn.Module:
        calls.append(kw)
        return module

    monkeypatch.setattr(torch, "compile", compile_recorded)
    before = inductor_config.layout_optimization
    ModuleKnobs({"m": torch.nn.Linear(2, 2)}).resolve(parse_knobs(f"compile={mode}"))
    (kw,) = calls
    assert kw.get("mode") is None and kw["dynamic"] is False  # torch.compile takes mode or options
    as_mode = torch._TorchCompileInductorWrapper(mode, None, False).config
    assert torch._TorchCompileInductorWrapper(None, kw["options"], False).config == {
        **as_mode,
        "layout_optimization": False,
    }
    assert inductor_config.layout_optimization is before


def test_channels_last_puts_weights_in_nhwc_and_back() -> None:
    with build("sync_loss", "cpu", WorkloadOptions(variant="fixed", knobs=parse_knobs("channels_last"))) as w:
        assert isinstance(w, SyncLossWorkload)
        conv = w.model[0].weight
        assert isinstance(conv, torch.Tensor)
        assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
        w.set_knob("channels_last", "off")
        assert w.model[0].weight is conv and conv.is_contiguous()


# -- live, in the step loop ---------------------------------------------------------------------
def _run(workload: Workload, controls: list[Control], steps: int = 40) -> list[Message]:
    got: list[Message] = []
    pending = list(controls)

    def next_control(timeout: float) -> Control | None:
        if loop.steps_issued >= 3 * (len(controls) - len(pending) + 1) and pending:
            return pending.pop(0)
        return None

    loop = StepLoop(workload, emit=got.append, controls=next_control, sample_interval_s=0.05)
    loop.run(steps=steps)
    return got


@pytest.mark.slow
def test_a_knob_change_is_an_event_and_the_samples_after_it_carry_the_knobs() -> None:
    with build("sync_loss", "cpu", WorkloadOptions(variant="fixed", image_size=32)) as w:
        msgs = _run(w, [SetKnob("channels_last", "on"), SetKnob("cuda_graph", "on"), SetKnobs("amp=bf16")])
    events = [m for m in msgs if isinstance(m, Event)]
    changed = [e for e in events if e.kind == EventKind.CHANGED]
    assert [(e.what, e.before, e.after) for e in changed] == [
        ("knobs", "none", "channels_last=on"),
        ("knobs", "channels_last=on", "amp=bf16"),
    ]
    assert changed[0].details["knobs"] == "channels_last=on"
    error = next(e for e in events if e.kind == EventKind.ERROR)
    assert error.what == "knobs" and "needs CUDA" in error.message and error.after == "channels_last=on,cuda_graph=on"
    samples = [m for m in msgs if isinstance(m, Sample)]
    assert samples[0].knobs == "none" and samples[-1].knobs == "amp=bf16"
    assert {s.knobs for s in samples} == {"none", "channels_last=on", "amp=bf16"}


@pytest.mark.slow
def test_a_slow_change_reports_progress_and_its_warm_up_stays_out_of_the_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gpudash.engine.events

    # a tick every 20 ms: even a compile from inductor's warm cache (a rerun) takes longer than that
    monkeypatch.setattr(gpudash.engine.events, "PROGRESS_EVERY_S", 0.02)
    with build("sync_loss", "cpu", WorkloadOptions(variant="fixed", image_size=16)) as w:
        msgs = _run(w, [SetKnob("compile", "default")], steps=8)
    progress = [m for m in msgs if isinstance(m, Event) and m.kind == EventKind.PROGRESS]
    assert progress and progress[0].message.startswith("compiling…") and progress[0].what == "knobs"
    changed = next(m for m in msgs if isinstance(m, Event) and m.kind == EventKind.CHANGED)
    after = [m for m in msgs if isinstance(m, Sample) and m.time_s > changed.time_s]
    assert after and after[0].knobs == "compile=default"
    # the first window after the change opens when the compile is done, not before it
    assert progress[-1].time_s < changed.time_s
    assert after[0].time_s - after[0].interval_s >= changed.time_s - 0.05


# -- CLI and CSV -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--knob", "nope"], "unknown knob 'nope'"),
        (["--knob", "amp=fp8"], "knob amp takes one of"),
        (["--knob", "tf32", "--device", "cpu"], "knob tf32 needs CUDA"),
        (["--knob", "amp=bf16", "--knob", "amp=off"], "--knob amp given twice"),
    ],
)
def test_bad_knob_flags_exit_2_with_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    out = _gpudash("--record", "x.csv", *args, cwd=tmp_path)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and says in out.stderr
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.slow
def test_record_with_knobs_writes_them_on_every_row(tmp_path: Path) -> None:
    # 10 steps: bf16 on a CPU without bf16 arithmetic takes ~1 s a step once warm (40 steps: 35 s)
    rows = record_rows(tmp_path, "--image-size", "32", "--knob", "channels_last", "--knob", "amp=bf16", "--steps", "10")
    samples = [r for r in rows if r["row_kind"] == "sample"]
    assert samples and {r["knobs"] for r in samples} == {"amp=bf16,channels_last=on"}
    summary = next(r for r in rows if r["row_kind"] == "summary")
    assert "[amp=bf16,channels_last=on]" in summary["event_message"]


def test_list_shows_every_knob_and_where_it_applies() -> None:
    out = _gpudash("list", cwd=ROOT)
    assert out.returncode == 0
    for name in KNOBS:
        assert name in out.stdout
    assert "needs CUDA" in out.stdout


@pytest.mark.parametrize(
    ("before", "after", "label"),
    [
        ("none", "amp=bf16,channels_last=on", "+amp=bf16 +channels_last"),
        ("channels_last=on", "channels_last=on,compile=default", "+compile=default"),
        ("amp=bf16,cuda_graph=on", "cuda_graph=on", "-amp"),
        ("compile=default", "compile=max-autotune", "compile=max-autotune"),
    ],
)
def test_a_knob_change_marker_says_only_what_changed(before: str, after: str, label: str) -> None:
    from gpudash.tui.state import marker_label

    assert marker_label(Event(time_s=1.0, kind=EventKind.CHANGED, what="knobs", before=before, after=after)) == label


def test_a_replay_takes_its_knobs_from_the_metadata() -> None:
    from gpudash.recording.sidecar import config_from_metadata

    assert config_from_metadata({"config": {"workload": "encdec", "knobs": "amp=bf16"}}).knobs == "amp=bf16"
    assert config_from_metadata({"config": {"workload": "encdec", "knobs": 5}}).knobs == "none"


def test_channels_last_relays_the_optimizers_state_with_the_weights() -> None:
    """Turning channels_last on converts the weights in place; SGD's momentum buffers, made before,
    must follow (fused SGD refuses a mix of layouts: the H100's ResNet-50 sweep failed on it)."""
    from tests.helpers import ROOT

    spec = f"{ROOT / 'examples' / 'frozen_trunk.py'}:workload"  # SGD with momentum
    with build(spec, "cpu", WorkloadOptions(batch_size=4)) as w:
        for _ in range(2):
            w.step()
        w.set_knob("channels_last", "on")
        conv = next(p for p in w.trained_parameters() if p.dim() == 4)
        buffer = w.optimizer.state[conv]["momentum_buffer"]
        assert conv.is_contiguous(memory_format=torch.channels_last)
        assert buffer.stride() == conv.stride()
        before = buffer.clone()
        w.step()
        assert not torch.equal(w.optimizer.state[conv]["momentum_buffer"], before)  # still the state stepped


def test_tf32_never_turns_tf32_off_everywhere_and_off_restores_pytorchs_defaults() -> None:
    """``tf32=never`` is strict float32 (cuDNN's convolutions too: the baseline of an "fp32" figure);
    ``on`` is TF32 for matrix products as well; ``off`` is PyTorch's defaults again."""
    from workloads import tuning

    defaults = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        tuning.apply_backend_flags(parse_knobs("tf32=never"))
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)
        tuning.apply_backend_flags(parse_knobs("tf32"))
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (True, True)
        tuning.apply_backend_flags(Knobs())
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == defaults
    finally:
        tuning.apply_backend_flags(Knobs())
