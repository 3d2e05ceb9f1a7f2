"""GPM's SM, tensor and DRAM activity and model FLOPs utilisation in the dashboard (Pilot): the
per-GPU gauges (and MIG instances'), GPM's chart beside kernel-active %, the reason GPM is blank told
once, MFU and TFLOP/s in the header, the stats panel and their chart, a blank MFU with its reason,
and recordings with and without these columns replayed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from rich.text import Text

from gpudash.core.protocol import Event, EventKind, GpuInfo, GpuReading, Message, MigReading, Sample
from gpudash.recording.replay import ReplaySource
from gpudash.tui.app import GpuDashApp
from gpudash.tui.gpu_rows import GpuRows
from gpudash.tui.layout import COMPACT_CHARTS, COMPACT_CHARTS_GPM, layout_for
from gpudash.tui.mfu import mfu_figure
from gpudash.tui.stats_panel import StatsPanel, StatsTable, fitted_columns, stats_table
from gpudash.tui.widgets import plain_text

from .conftest import replay_loaded
from .dashboard import DashPilot, chart, make_app, message, ready, shown
from .fakes import FakeSource, flops_event, gpm_gpu, run_segment, started, with_model

DATA = Path(__file__).parent / "data"
GPM_RECORDING = DATA / "replay-gpm.csv"  # tests/tui/make_fixture.py --gpm
OLD_RECORDING = Path(__file__).parents[1] / "data" / "recordings" / "before-gpm.csv"
TWO_GPUS = GpuInfo(available=True, driver="550.54.15", names=("NVIDIA H100 80GB HBM3",) * 2, index=0, sampled=(0, 1))
NO_GPM = "GPM needs Hopper or newer: NVIDIA A100-SXM4-80GB is Ampere"
COUNTED = "model FLOPs: 1.93 TFLOP a step (bf16 100%); MFU over 989 TFLOP/s (H100 SXM bf16 dense, NVIDIA datasheet)"
MIXED = (
    "model FLOPs: 1.93 TFLOP a step (bf16 60%, fp32 40%); MFU blank: the step mixes dtypes, which has no single peak"
)


def rows(app: GpuDashApp) -> list[str]:
    widget = app.query_one(GpuRows)
    return plain_text(widget, widget.size.width).rstrip("\n").split("\n") if widget.display else []


def messages_said(app: GpuDashApp, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every message the app says from now on, with its severity ("info", "warning", "error")."""
    said: list[tuple[str, str]] = []
    say = app.say

    def recording(text: str, severity: str = "info", toast: bool = False) -> None:
        said.append((text, str(getattr(severity, "value", severity))))
        say(text, severity, toast)

    monkeypatch.setattr(app, "say", recording)
    return said


def screen_lines(app: GpuDashApp) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def shown_charts(app: GpuDashApp) -> tuple[str, ...]:
    return tuple(c.spec.id for c in app.visible_charts)


def ticks(t0: float, t1: float, gpus: tuple[GpuReading, ...] = (), gpm: bool = True, **kw: object) -> list[Message]:
    """A run's samples from ``t0`` to ``t1`` with an NVML tick every 0.5 s: GPM's figures of the
    workload's GPU (82% SMs busy, 76% tensor, 31% DRAM) where ``gpm``, and ``gpus``' readings."""
    out: list[Message] = []
    for m in run_segment(t0, t1, 200.0, **kw):
        if isinstance(m, Sample):
            out.append(m)
        else:
            out.append(gpm_gpu(m.time_s, *((82.0, 76.0, 31.0) if gpm else (None, None, None)), util=97.0, per_gpu=gpus))
    return out


def two_gpus(gpm: bool = True) -> tuple[GpuReading, ...]:
    if not gpm:
        return (GpuReading(0, 97.0, 3072.0, 81920.0, 250.0, 1980.0, 61.0), GpuReading(1, 26.0, 1024.0, 81920.0, 120.0))
    return (
        GpuReading(0, 97.0, 3072.0, 81920.0, 250.0, 1980.0, 61.0, 82.0, 76.0, 31.0),
        GpuReading(1, 26.0, 1024.0, 81920.0, 120.0, 1410.0, 40.0, 4.4, None, 2.0),
    )


async def draw(pilot: DashPilot, app: GpuDashApp, src: FakeSource, *messages: Message) -> None:
    await ready(app, pilot)
    src.push(*messages)
    app.refresh_now()
    await pilot.pause()
    app.refresh_now()  # the layout the new charts asked for, drawn
    await pilot.pause()


# -- GPM ------------------------------------------------------------------------------------------------
async def test_gpm_figures_show_per_gpu_beside_kernel_active_with_the_values_given() -> None:
    src = FakeSource(gpu_info=TWO_GPUS)
    app = make_app(src)
    async with app.run_test(size=(120, 36)) as pilot:
        change = Event(6.0, EventKind.CHANGED, "batch_size", "8", "16")
        await draw(
            pilot, app, src, started(), *ticks(1.0, 6.0, two_gpus()), change, *ticks(6.0, 10.0, two_gpus(), batch=16)
        )
        first, second = rows(app)
        assert first.startswith("▶ GPU 0") and "kernel ran" in first and "SMs busy" in first
        assert "97%" in first and "82%" in first and "tensor ▕" in first and "76%" in first and "31%" in first
        assert "26%" in second and " 4%" in second and "tensor –" in second and " 2%" in second
        assert "ANY kernel ran" in str(app.query_one(GpuRows).tooltip)  # kernel ran ≠ SMs busy, in words
        assert shown_charts(app) == COMPACT_CHARTS_GPM  # GPM's chart beside kernel-active %, for power's
        gpm = chart(app, "gpm")
        assert gpm.points_drawn > 0 and "⠒ SMs busy · • tensor · + DRAM" in gpm.spec.title
        assert (6.0, "batch 8→16") in gpm.marker_labels  # the change, marked on the new chart too


async def test_one_gpu_with_gpm_gets_its_row_of_gauges() -> None:
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=(120, 36)) as pilot:
        await draw(pilot, app, src, started(), *ticks(1.0, 5.0))
        (row,) = rows(app)
        assert row.startswith("▶ GPU 0") and "97%" in row and "82%" in row and "76%" in row and "31%" in row


async def test_gpm_unavailable_shows_dashes_and_its_reason_once_and_the_rest_runs(monkeypatch) -> None:
    src = FakeSource(gpu_info=replace(TWO_GPUS, gpm_unavailable=NO_GPM))
    app = make_app(src)
    said = messages_said(app, monkeypatch)
    async with app.run_test(size=(120, 36)) as pilot:
        await draw(pilot, app, src, started(), *ticks(1.0, 5.0, two_gpus(gpm=False), gpm=False))
        src.push(*ticks(5.0, 8.0, two_gpus(gpm=False), gpm=False))
        app.refresh_now()
        await pilot.pause()
        told = [(text, severity) for text, severity in said if NO_GPM in text]
        assert told == [
            (
                f"GPM unavailable: {NO_GPM} — SMs busy, tensor and DRAM read –; kernel% says only that a kernel ran",
                "warning",
            )
        ]
        for line in rows(app):
            assert "SMs busy –" in line and "tensor –" in line and "DRAM –" in line and "kernel ran" in line
        assert "gpm" not in shown_charts(app) and shown_charts(app) == COMPACT_CHARTS  # no empty chart
        assert chart(app, "gpu_util").points_drawn > 0 and app.state.now("steps_per_s") == pytest.approx(200.0)


async def test_each_mig_instance_gets_a_labelled_row() -> None:
    src = FakeSource()
    app = make_app(src)
    mig = (MigReading("GPU 0 · GI 1", 45.0, 30.0, 20.0), MigReading("GPU 0 · GI 2", 5.0, None, 3.0))
    async with app.run_test(size=(120, 36)) as pilot:
        await draw(pilot, app, src, started(), gpm_gpu(2.0, None, None, None, mig=mig))
        lines = rows(app)
        one = next(line for line in lines if "GPU 0 · GI 1" in line)
        two = next(line for line in lines if "GPU 0 · GI 2" in line)
        assert "45%" in one and "30%" in one and "20%" in one
        assert " 5%" in two and "tensor –" in two and " 3%" in two


# -- MFU ------------------------------------------------------------------------------------------------
def with_mfu(messages: list[Message], tflops: float | None, mfu: float | None) -> list[Message]:
    return [with_model(m, tflops, mfu) if isinstance(m, Sample) else m for m in messages]


async def test_mfu_shows_in_the_header_the_stats_its_chart_and_what_was_counted() -> None:
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=(120, 48)) as pilot:
        counted = flops_event(1.0, COUNTED)
        await draw(pilot, app, src, started(), counted, *with_mfu(ticks(1.0, 8.0), 407.3, 41.2))
        assert "MFU 41.2% · 407 TFLOP/s" in shown(app, "#header")
        table = stats_table(app.state)
        now = dict(zip(table.headers, dict(table.rows)["now"], strict=True))
        assert now["MFU%"].plain == "41.2"
        assert COUNTED in str(app.query_one(StatsPanel).border_title)  # what was counted, against which peak
        assert "mfu" in shown_charts(app) and chart(app, "mfu").points_drawn > 0
        src.push(Event(8.0, EventKind.CHANGED, "batch_size", "8", "16"), flops_event(8.0, COUNTED))
        src.push(*with_mfu(ticks(8.0, 10.0, batch=16), 420.0, 42.5))
        app.refresh_now()
        await pilot.pause()
        assert message(app) == COUNTED  # the new configuration's count, told as it comes
        assert (8.0, "batch 8→16") in chart(app, "mfu").marker_labels


async def test_a_blank_mfu_reads_blank_never_zero_and_its_reason_is_said_once_not_in_the_header() -> None:
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=(120, 36)) as pilot:
        await draw(pilot, app, src, started(), flops_event(1.0, MIXED), *with_mfu(ticks(1.0, 5.0), 407.3, None))
        header = screen_lines(app)[0]  # the reason whole in the stats panel's border, not again up here
        assert "407 TFLOP/s · MFU blank" in header and "mixes dtypes" not in header
        assert "MFU 0" not in header and "0.0%" not in header
        assert MIXED in str(app.query_one(StatsPanel).border_title)
        now = dict(zip(stats_table(app.state).headers, dict(stats_table(app.state).rows)["now"], strict=True))
        assert now["MFU%"].plain == "–"
        assert message(app) == MIXED


def test_the_headers_mfu_says_what_is_known() -> None:
    blank = flops_event(1.0, "MFU blank: no GPU, so no peak to compare with: give one with --peak-tflops")
    s = with_model(run_segment(1.0, 1.25, 100.0)[0], None, None)  # type: ignore[arg-type]  # a Sample
    assert mfu_figure(s, None) is None  # nothing counted (an old recording): nothing said
    assert mfu_figure(s, blank) == ("MFU blank", "no GPU, so no peak to compare with: give one with --peak-tflops")
    assert mfu_figure(with_model(s, 0.5, None), None) == ("0.500 TFLOP/s · MFU blank", "its FLOPs not counted yet")
    assert mfu_figure(with_model(s, 12.5, 3.25), None) == ("MFU 3.2% · 12.5 TFLOP/s", None)


# -- replays --------------------------------------------------------------------------------------------
async def test_a_recording_with_gpm_and_mfu_replays_them() -> None:
    app = make_app(ReplaySource(GPM_RECORDING))
    async with app.run_test(size=(120, 48)) as pilot:
        await replay_loaded(pilot, app)
        app.refresh_now()
        await pilot.pause()
        (row,) = rows(app)
        assert "SMs busy ▕" in row and "tensor ▕" in row and "DRAM ▕" in row
        assert "MFU 48.8% · 483 TFLOP/s" in shown(app, "#header")
        assert {"gpm", "mfu"} <= set(shown_charts(app))
        changes = ["serial→pipelined", "batch 8→16", "pipelined→serial"]
        for name in ("gpm", "mfu"):
            assert [label for _, label in chart(app, name).marker_labels] == changes
        assert "model FLOPs: 3.84 TFLOP a step" in str(app.query_one(StatsPanel).border_title)


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_a_recording_from_before_gpm_replays_with_those_places_empty(size, monkeypatch) -> None:
    app = make_app(ReplaySource(OLD_RECORDING))
    said = messages_said(app, monkeypatch)
    async with app.run_test(size=size) as pilot:
        await replay_loaded(pilot, app)
        app.refresh_now()
        await pilot.pause()
        assert not [text for text, severity in said if severity == "error"]
        assert app.state.last_sample is not None and app.state.last_gpu is not None
        assert not {"gpm", "mfu"} & set(shown_charts(app))
        assert len(rows(app)) == 2 and not any("SMs busy" in line or "SM " in line for line in rows(app))
        assert "MFU" not in shown(app, "#header")
        table = stats_table(app.state)
        for row, cells in table.rows:
            cell = dict(zip(table.headers, cells, strict=True))
            assert cell["SM%"].plain == "–" and cell["MFU%"].plain == "–", row


# -- the stats panel's columns --------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_the_stats_panel_shows_whole_columns_that_fit_the_most_wanted_first(size) -> None:
    app = make_app(ReplaySource(GPM_RECORDING))
    async with app.run_test(size=size) as pilot:
        await replay_loaded(pilot, app)
        app.refresh_now()
        await pilot.pause()
        panel = app.query_one(StatsPanel)
        lines = screen_lines(app)[panel.region.y : panel.region.bottom]
        names = next(line for line in lines if "p50 ms" in line)
        assert all(len(line.rstrip()) <= size[0] for line in lines)
        assert "…" not in "".join(lines[2:])  # no column squeezed until its cells are cut
        for label in ("steps/s", "samples/s", "p50 ms", "MFU%", "SM%", "kernel%"):
            assert f" {label}" in names, label
        assert len(stats_table(app.state).headers) == 13  # what "Copy stats" copies: every column


def test_columns_with_nothing_to_show_go_first_then_the_least_wanted() -> None:
    cell = Text
    headers = ["steps/s", "mem-bw%", "SM%", "MFU%"]
    table = StatsTable(
        Text(""),
        headers,
        [("now", [cell("200"), cell("40.0"), cell("–"), cell("41.2")])],
        keys=["steps_per_s", "mem_bw_util_pct", "sm_active_pct", "mfu_pct"],
    )
    assert fitted_columns(table, 200) == [0, 1, 2, 3]  # all fit: all shown
    assert fitted_columns(table, 9 + 9 + 9 + 9) == [0, 1, 3]  # the empty SM% first
    assert fitted_columns(table, 9 + 9 + 9) == [0, 3]  # then mem-bw%, the least wanted
    assert fitted_columns(table, 1) == [0]  # steps/s stays


def test_the_compact_layout_puts_gpms_chart_beside_kernel_active_once_it_has_figures() -> None:
    every = ("throughput", "step_time", "gpu_util", "gpm", "power", "memory", "mfu", "syncs")
    assert layout_for(120, 36, True, every).charts == COMPACT_CHARTS_GPM
    without = tuple(c for c in every if c not in ("gpm", "mfu"))
    assert layout_for(120, 36, True, without).charts == COMPACT_CHARTS
    assert layout_for(120, 48, True, every).charts == every  # tall: every chart with figures
    assert len(layout_for(50, 40, True, every).charts) == 4  # one column: no more than fit


def test_a_count_is_found_again_by_the_knobs_that_change_the_dtype_only() -> None:
    """compile reuses its eager configuration's count (the engine says nothing new); amp=bf16 does
    not reuse an fp32 count's line."""
    from dataclasses import replace

    from gpudash.tui.mfu import FlopsCounts

    counts = FlopsCounts()
    s = run_segment(1.0, 1.25, 100.0)[0]
    assert isinstance(s, Sample)
    fp32, bf16 = flops_event(1.0, "model FLOPs: 1 TFLOP a step (fp32 100%)"), flops_event(2.0, "bf16 count")
    for event, knobs in ((fp32, "none"), (bf16, "amp=bf16")):
        counts.on_event(event)
        counts.on_sample(replace(s, knobs=knobs))
    assert counts.of(replace(s, knobs="compile=default")) is fp32
    assert counts.of(replace(s, knobs="amp=bf16,compile=default")) is bf16
    assert counts.of(replace(s, knobs="amp=bf16,cuda_graph=on")) is bf16
