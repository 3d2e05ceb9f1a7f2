"""``gpudash replay`` treats its files as hostile: a bad metadata file is ignored with its reason,
a CSV that is not a recording (or holds nothing) is one line and exit 2, bad rows are skipped
and counted, no control character from a file reaches the dashboard or the terminal, and any
exception in the dashboard is one line naming its log, with status 1."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Static

from gpudash.core.protocol import Event, EventKind, ExitCode, GpuInfo, Message, Sample
from gpudash.recording.csvformat import event_row, format_row, header, sample_row
from gpudash.recording.replay import NotARecording, ReplaySource, read_all
from gpudash.recording.sidecar import UNKNOWN_CONFIG, read_sidecar
from gpudash.tui.app import GpuDashApp
from gpudash.tui.entry_points import run_app
from gpudash.tui.widgets import MessageBar
from tests.messages import present, samples_of
from tests.tui.conftest import replay_loaded, wait_until
from tests.tui.fakes import FakeSource, gpu, sample

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "tui" / "data" / "replay.csv"
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0, DEL, C1
# OSC 52 (a terminal that runs it writes the clipboard), colours, a C1 CSI, NUL, DEL, NEL; then printable text
HOSTILE = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b[31mred\x1b[0m\x9b2J\x00\x7f\x85 → ok"


def recording(tmp_path: Path, sidecar: object | None = None, name: str = "run") -> Path:
    """A copy of the fixture recording, with ``sidecar`` (JSON-encoded; a str as is) beside it."""
    p = tmp_path / f"{name}.csv"
    shutil.copy(FIXTURE, p)
    if sidecar is not None:
        text = sidecar if isinstance(sidecar, str) else json.dumps(sidecar)
        p.with_suffix(".json").write_text(text)
    return p


def replay_cli(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpudash", "replay", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


# -- the metadata file ------------------------------------------------------------------------------
BAD_SIDECARS = [
    ({"config": {"workload": ["x"]}}, "config.workload is a list, not a workload name"),
    ({"config": {"variant": 5}}, "config.variant is a number, not a string"),
    ({"config": {"workload": "encdec", "variant": "warp"}}, "config.variant: unknown variant 'warp'"),
    ({"config": {"workload": "encdec", "batch_size": -3}}, "config.batch_size: batch size must be at least 1"),
    ({"config": {"workload": "encdec", "knobs": 5}}, "config.knobs is a number, not knob settings"),
    ({"config": {"workload": "encdec", "sample_interval_s": 0}}, "config.sample_interval_s is 0"),
    ({"gpu_names": ["A100"], "gpu_index": 7}, "gpu_index 7 is not one of the 1 GPUs"),
    ({"gpu_name": {"name": "H100"}}, "gpu_name is an object, not a string"),
    ({"device": "tpu:0"}, "device: expected auto, cpu, cuda or cuda:N"),
    ({"rows": True}, "rows is true/false, not a whole number"),
    (
        {"started": {"torch": "2.11", "settings": ["num_workers=0"]}},
        "started: its settings are not an object of strings",
    ),
    ({"started": {"torch": 2.11}}, "started is not an object of strings and whole numbers"),
    ([1, 2], "it is a list, not an object"),
    ("{not json", "not JSON"),
    ("[" * 100_000, "nested too deeply"),
    ({"later": {"a": json.loads("[" * 40 + "]" * 40)}}, "nested too deeply (more than 16 levels)"),
]


@pytest.mark.parametrize("sidecar, why", BAD_SIDECARS, ids=[w.split(" ")[0] for _, w in BAD_SIDECARS])
def test_a_bad_metadata_file_is_ignored_with_its_reason(tmp_path: Path, sidecar: object, why: str) -> None:
    src = ReplaySource(recording(tmp_path, sidecar))
    msgs = read_all(src)
    assert len(msgs) > 100  # the rows are read as ever
    (note,) = src.info.notes
    assert note.startswith("run.json ignored: ") and why in note and "\n" not in note
    assert src.metadata == {} and src.config == UNKNOWN_CONFIG  # nothing of it is trusted
    assert not src.gpu_info.available and "run.json ignored" in present(src.gpu_info.unavailable)


def test_unknown_keys_are_ignored_and_the_rest_is_trusted(tmp_path: Path) -> None:
    meta = json.loads(FIXTURE.with_suffix(".json").read_text())
    meta["written_by_a_later_gpudash"] = {"anything": [1, 2]}
    meta["config"]["a_new_option"] = "x"
    meta["started"] = {"torch": "2.11", "settings": {"num_workers": "0", "site": "/a,b/train.py:9"}}  # a job's
    side = read_sidecar(recording(tmp_path, meta))
    assert side.problem is None and side.data["driver"] == "550.54.15"
    src = ReplaySource(tmp_path / "run.csv")
    read_all(src)
    assert (
        src.info.notes == ()
        and present(src.gpu_info.name).startswith("NVIDIA H100")
        and src.config.workload == "encdec"
    )


@pytest.mark.parametrize(
    "sidecar", [{"config": {"workload": ["x"]}}, {"config": {"variant": 5}}], ids=["workload-list", "variant-number"]
)
async def test_the_dashboard_shows_a_bad_metadata_files_reason_and_keeps_running(
    tmp_path: Path, sidecar: dict[str, object]
) -> None:
    app = GpuDashApp(ReplaySource(recording(tmp_path, sidecar)), clock=lambda: 0.0, toasts=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await replay_loaded(pilot, app)
        await wait_until(
            pilot, lambda: "run.json ignored" in app.query_one("#messages", MessageBar).text, "the warning"
        )
        app.refresh_now()
        content = app.query_one("#header", Static).content
        assert isinstance(content, Text)
        header = content.plain
        assert "encdec / serial · batch 16" in header  # from the CSV's rows, not the metadata
        assert "run.json ignored: config." in header  # and the GPU line says why it knows nothing
        await pilot.press("q")
    assert app.return_code == 0


def texts(value: object) -> list[str]:
    """Every string in ``value``: a message, ``GpuInfo``, metadata (dicts, lists, dataclasses)."""
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value):
        return texts(dataclasses.asdict(value))  # type: ignore[arg-type]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (*texts(k), *texts(v))]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in texts(v)]
    return []


def test_no_control_character_reaches_the_dashboard_from_the_metadata(tmp_path: Path) -> None:
    meta = json.loads(FIXTURE.with_suffix(".json").read_text())
    meta.update(
        gpu_name=HOSTILE,
        gpu_names=[HOSTILE],
        driver=HOSTILE,
        hostname=HOSTILE,
        torch_version=HOSTILE,
        **{HOSTILE: HOSTILE},
    )
    src = ReplaySource(recording(tmp_path, meta, name="run\x1b]52;c;aGk=\x07"))  # the file's name is shown too
    read_all(src)
    assert src.info.notes == ()  # the file is good: only its text is cleaned
    shown = texts(src.gpu_info) + texts(src.metadata) + texts(src.config) + texts(src.info)
    assert "]52;c;Y3VybCBldmlsLnNoIHwgc2g=[31mred[0m2J → ok" in shown and isinstance(src.gpu_info, GpuInfo)
    assert not [t for t in shown if CONTROL.search(t)]


# -- the CSV ------------------------------------------------------------------------------------------
NOT_RECORDINGS = [
    (
        "foreign.csv",
        "a,b,c\n1,2,3\n4,5,6\n",
        "foreign.csv: not a gpudash recording (missing columns: row_kind, time_s, workload, variant, batch_size, "
        "steps and 23 more)",
    ),
    ("empty.csv", "", "empty.csv is empty: not a gpudash recording"),
    ("blank.csv", "\n\n  \n", "blank.csv is empty: not a gpudash recording"),
    ("header.csv", format_row(header()), "header.csv has only its header: nothing was recorded"),
    ("binary.csv", "\x00\x01\x02\xff" * 100, "binary.csv: not a gpudash recording (missing columns: row_kind"),
]


@pytest.mark.parametrize("name, text, says", NOT_RECORDINGS, ids=[n for n, _, _ in NOT_RECORDINGS])
def test_a_file_that_is_not_a_recording_is_one_line_and_exit_2(tmp_path: Path, name: str, text: str, says: str) -> None:
    p = tmp_path / name
    p.write_text(text, encoding="latin-1")
    done = replay_cli(p)
    assert done.returncode == ExitCode.USAGE, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"gpudash: error: {says}")


def test_a_refused_file_is_closed(tmp_path: Path) -> None:
    p = tmp_path / "foreign.csv"
    p.write_text("a,b\n1,2\n")
    src = ReplaySource(p)
    with pytest.raises(NotARecording):
        src.start()
    assert src._f is None and not src.alive


def test_a_recording_being_written_may_be_empty_when_followed(tmp_path: Path) -> None:
    p = tmp_path / "new.csv"
    p.write_text("")  # gpudash --record has created it; the header is still to come
    src = ReplaySource(p, follow=True)
    src.start()
    try:
        assert src.config == UNKNOWN_CONFIG  # "? / ?" in the header, not a default workload
        with p.open("a") as f:
            f.write(format_row(header()) + format_row(sample_row(sample(1.0, 100.0), None)))
        deadline, got = time.monotonic() + 30, list[Message]()
        while not got and time.monotonic() < deadline:
            got = src.poll()
            time.sleep(0.01)
        assert [m.steps_per_s for m in samples_of(got)] == [100.0] and len(got) == 1
    finally:
        src.stop()


def test_a_followed_file_whose_header_turns_out_foreign_says_so_once(tmp_path: Path) -> None:
    p = tmp_path / "new.csv"
    p.write_text("")
    src = ReplaySource(p, follow=True)
    src.start()
    p.write_text("a,b,c\n1,2,3\n")
    deadline = time.monotonic() + 30
    with pytest.raises(NotARecording, match="not a gpudash recording"):
        while time.monotonic() < deadline:
            src.poll()
            time.sleep(0.01)
    assert src.poll() == [] and not src.alive
    src.stop()


def hostile_rows(p: Path) -> None:
    """Good samples at 1.0 and 9.0 around rows a CSV reader or a chart could choke on."""
    good = format_row(sample_row(sample(1.0, 100.0), None))
    cells = good.rstrip("\n").split(",")

    def variant(**change: str) -> str:
        row = dict(zip(header(), cells, strict=False))
        row.update(change)
        return format_row(list(row.values()))

    p.write_text(
        format_row(header())
        + good
        + variant(time_s="inf")
        + variant(time_s="nan")
        + variant(time_s="-5")
        + variant(time_s="1e300")
        + variant(batch_size="inf")  # int(float("inf")): OverflowError
        + variant(row_kind="bogus")
        + variant(event_kind="exploded", row_kind="event")
        + "x" * (2 << 20)
        + "\n"  # a "row" of 2 MiB
        + variant(steps_per_s="inf", time_s="2.0")  # a value that is not finite: "not available"
        + format_row(event_row(Event(3.0, EventKind.ERROR, message='a stray " quote, alone')))
        + format_row(sample_row(sample(9.0, 100.0), None))
    )


def test_rows_a_chart_could_choke_on_are_skipped_and_counted(tmp_path: Path) -> None:
    p = tmp_path / "hostile.csv"
    hostile_rows(p)
    src = ReplaySource(p)
    msgs = read_all(src)
    assert [m.time_s for m in msgs] == [1.0, 2.0, 3.0, 9.0]
    second = msgs[1]
    assert isinstance(second, Sample) and second.steps_per_s is None
    assert src.bad_rows == 8 and src.rows_read == 4


def test_an_unbalanced_quote_does_not_swallow_the_file_or_hang(tmp_path: Path) -> None:
    p = tmp_path / "quote.csv"
    rows = "".join(format_row(sample_row(sample(1 + i / 4, 100.0), None)) for i in range(20_000))
    p.write_text(format_row(header()) + 'sample,"0.5,encdec\n' + rows)  # the quote never closes
    src = ReplaySource(p)
    read_all(src, timeout_s=120)
    assert src.bad_rows >= 1  # whatever was swallowed is one bad record, not a crash


# where a recording's text reaches the dashboard: each field of a row, with HOSTILE in it
FIELDS = [
    ("workload", [sample_row(sample(1.0, 100.0, workload="encdec" + HOSTILE), gpu(1.0))]),
    ("variant", [sample_row(sample(1.0, 100.0, variant=HOSTILE), None)]),
    ("knobs", [sample_row(sample(1.0, 100.0, knobs="amp=bf16" + HOSTILE), None)]),
    ("event-what-before-after", [event_row(Event(1.0, EventKind.CHANGED, HOSTILE, HOSTILE, HOSTILE))]),
    ("event-message", [event_row(Event(1.0, EventKind.ERROR, message=HOSTILE))]),
    ("event-message-quoted", [event_row(Event(1.0, EventKind.ERROR, message=f'a, "quoted"\r\n{HOSTILE}'))]),
]


@pytest.mark.parametrize("rows", [r for _, r in FIELDS], ids=[n for n, _ in FIELDS])
def test_no_control_character_reaches_the_dashboard_from_a_csv(tmp_path: Path, rows: list[list[str]]) -> None:
    p = tmp_path / "run.csv"
    p.write_text(format_row(header()) + "".join(map(format_row, rows)) + format_row(sample_row(sample(2, 9.0), None)))
    src = ReplaySource(p)
    msgs = read_all(src)
    assert src.rows_read == len(rows) + 1 and src.bad_rows == 0  # read, not skipped: only cleaned
    shown = texts(msgs)
    assert any("]52;c;Y3VybCBldmlsLnNoIHwgc2g=[31mred[0m2J → ok" in t for t in shown)
    assert not [t for t in shown if CONTROL.search(t.replace("\n", ""))]  # a quoted cell keeps its line feed


def test_a_refusal_names_the_file_without_its_control_characters(tmp_path: Path) -> None:
    p = tmp_path / "run\x1b]52;c;aGk=\x07\x1b[31m\x9b2J.csv"
    p.write_text("a,b,c\n1,2,3\n")
    done = replay_cli(p)
    assert done.returncode == ExitCode.USAGE, done.stderr
    (line,) = done.stderr.splitlines()
    assert (
        line == "gpudash: error: run]52;c;aGk=[31m2J.csv: not a gpudash recording (missing columns: row_kind, "
        "time_s, workload, variant, batch_size, steps and 23 more)"
    )


# -- exceptions in the dashboard -------------------------------------------------------------------------
CRASHING_SOURCE = textwrap.dedent("""
    import sys
    from gpudash.core.protocol import Sample
    from gpudash.tui.entry_points import run_app
    from tests.tui.fakes import FakeSource, started

    class Hostile(FakeSource):
        def stop(self):
            super().stop()
            print("source stopped", flush=True)

    src = Hostile()
    # a message no recorder would write: its time is text, so the dashboard's state raises on it
    src.push(started(1.0), Sample("soon", "encdec", "serial", 8, 1, 8, 0.25, 4.0, 32.0, 1.0, 1.0, 0.0))
    sys.exit(run_app(src, headless=True))
""")


@pytest.mark.slow
def test_an_exception_in_the_dashboard_is_one_line_with_its_log_and_status_1(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_SOURCE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == ExitCode.FAILED, done.stderr
    (line,) = done.stderr.strip().splitlines()  # no traceback on the terminal
    m = re.fullmatch(r"gpudash: error: the dashboard failed: TypeError: .+ \(traceback in (\S+)\)", line)
    assert m, line
    log = Path(m.group(1))
    try:
        assert "Traceback (most recent call last)" in log.read_text() and "TypeError" in log.read_text()
    finally:
        log.unlink()
    assert "source stopped" in done.stdout


class UnbuildableSource(FakeSource):
    """A source whose ``info`` fails: the dashboard cannot be built over it."""

    @property
    def info(self):  # noqa: ANN201
        raise RuntimeError("the source's info is gone")


def test_when_building_the_dashboard_fails_the_source_is_stopped(capsys: pytest.CaptureFixture[str]) -> None:
    src = UnbuildableSource()
    assert run_app(src, headless=True) == ExitCode.FAILED
    assert src.stopped == 1
    line = capsys.readouterr().err.strip()
    assert line.startswith("gpudash: error: the dashboard failed: RuntimeError: the source's info is gone")
    log = Path(present(re.search(r"traceback in (\S+)\)", line)).group(1))
    assert "building the dashboard" in log.read_text()
    log.unlink()
