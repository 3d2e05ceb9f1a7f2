"""The dashboard's run controller and the knobs, without Textual: the running knobs come from the
messages, a change is sent once and builds on the one asked for, a knob the device or the variant
cannot take is refused before it is sent, and a change's progress shows until it arrives or is
refused (the other keys: tests/test_controller.py)."""

from __future__ import annotations

from gpudash.core.protocol import Event, EventKind, SetKnob, SetKnobs
from gpudash.tui.controller import Severity
from gpudash.tui.state import Status
from tests.messages import present
from tests.test_controller import running
from workloads.knobs import KNOBS, Knobs, parse_knobs
from workloads.registry import family

from .tui.fakes import run_segment


def test_the_running_knobs_come_from_the_messages() -> None:
    ctl, src = running(device="cpu")
    assert ctl.knobs.running == Knobs() and ctl.knobs.label() == "none"
    src.push(
        Event(
            3.0,
            EventKind.CHANGED,
            "knobs",
            "none",
            "amp=bf16,channels_last=on",
            details={"knobs": "amp=bf16,channels_last=on"},
        )
    )
    notices = ctl.poll()
    assert ctl.knobs.running == parse_knobs("amp=bf16,channels_last=on")
    assert ctl.knobs.label() == "amp=bf16, channels_last"
    assert "knobs: none → amp=bf16,channels_last=on" in notices[-1].text
    src.push(*run_segment(3.0, 4.0, 100.0, knobs="amp=bf16"))
    ctl.poll()
    assert ctl.knobs.text == "amp=bf16"  # the latest sample says what runs


def test_a_knob_change_is_sent_once_and_builds_on_the_one_asked_for() -> None:
    ctl, src = running(device="cpu")
    notice = ctl.knobs.ask_all(Knobs({"channels_last": "on", "amp": "bf16"}))
    assert src.sent == [SetKnobs("amp=bf16,channels_last=on")]
    assert notice.text == "knobs none → amp=bf16,channels_last=on requested…"
    ctl.knobs.toggle("channels_last")  # before the engine answered: off again, amp stays
    assert src.sent[-1] == SetKnob("channels_last", "off")
    assert ctl.knobs.base() == Knobs({"amp": "bf16"})
    assert "already" in ctl.knobs.ask("amp", "bf16").text and len(src.sent) == 2
    assert "compiling first" in ctl.knobs.ask("compile", "max-autotune").text
    src.push(Event(3.0, EventKind.CHANGED, "knobs", "none", "amp=bf16,compile=max-autotune"))
    ctl.poll()
    assert ctl.pending_knobs is None and ctl.knobs.text == "amp=bf16,compile=max-autotune"


def test_a_knob_the_device_or_variant_cannot_take_is_refused_before_sending() -> None:
    ctl, src = running(device="cpu")
    for name in ("cudnn_benchmark", "tf32", "cuda_graph"):
        notice = ctl.knobs.toggle(name)
        assert notice.severity == Severity.ERROR and notice.toast
        assert present(KNOBS[name].refusal(family("encdec").variant("serial"), "cpu", Knobs())) in notice.text
        assert "\n" not in notice.text and "knobs stay none" in notice.text
    assert src.sent == [] and ctl.state.status == Status.RUNNING
    assert ctl.knobs.refusals()["cuda_graph"] and ctl.knobs.refusals()["compile"] is None
    ctl, src = running("sync_loss", "sync-heavy", device="cuda:0")
    assert "sync-free" in ctl.knobs.ask("cuda_graph", "on").text and src.sent == []
    ctl, src = running("sync_loss", "fixed", device="cuda:0")
    ctl.knobs.ask("compile", "default")
    assert "cannot wrap a compiled model" in ctl.knobs.ask("cuda_graph", "on").text  # beside the one asked for
    assert src.sent == [SetKnob("compile", "default")]


def test_progress_shows_until_the_change_arrives() -> None:
    ctl, src = running(device="cuda:0")
    ctl.knobs.ask("compile", "default")
    notices = ctl.ingest([Event(4.0, EventKind.PROGRESS, "knobs", message="compiling… 12 s")])
    assert notices[0].text.startswith("compiling… 12 s — applying knobs compile=default")
    assert ctl.status_text() == "compiling… 12 s"
    ctl.ingest([Event(5.0, EventKind.CHANGED, "knobs", "none", "compile=default")])
    assert ctl.status_text() == "running" and ctl.knobs.label() == "compile=default"


def test_a_knob_refused_by_the_workload_says_the_knobs_stay() -> None:
    ctl, src = running(device="cuda:0")
    ctl.knobs.ask("compile", "default")
    notices = ctl.ingest(
        [Event(4.0, EventKind.ERROR, "knobs", "none", "compile=default", "compile failed: no C compiler")]
    )
    assert "compile failed: no C compiler" in notices[-1].text and "knobs stay none" in notices[-1].text
    assert ctl.pending_knobs is None
