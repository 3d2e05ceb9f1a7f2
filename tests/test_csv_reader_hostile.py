"""The one bounded CSV reader (``CsvRecords``, ``read_table``), in process, on odd and hostile
files: records cut across reads, quoted line feeds, overlong records and fields, control
characters, files without their last newline; and the one-line refusals ``gpudash report`` prints."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from gpudash.recording.csvread import MAX_RECORD, CsvRecords, UnreadableCsv, read_table

FIELD_LIMIT = 131072  # csv's default field limit


class Bad(list[tuple[int, str]]):
    """The bad records a reader reported: (line, why)."""

    def __call__(self, line: int, why: str) -> None:
        self.append((line, why))


def read_all(text: str, size: int) -> tuple[list[tuple[int, list[str]]], CsvRecords, Bad]:
    """Every record of ``text``, read ``size`` characters at a time, then ``finish``."""
    bad = Bad()
    records = CsvRecords(io.StringIO(text), bad)
    out: list[tuple[int, list[str]]] = []
    while not records.at_end:
        out.extend(records.read(size))
    out.extend(records.finish())
    return out, records, bad


TEXT = 'a,b,c\n1,"two\nlines",3\n\n   \n4,5,"six, ""quoted"""\n7,8,9\n'
WANT = [(1, ["a", "b", "c"]), (2, ["1", "two\nlines", "3"]), (6, ["4", "5", 'six, "quoted"']), (7, ["7", "8", "9"])]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11, 64, 1 << 20])
def test_records_are_whole_and_numbered_by_line_whatever_the_reads_size(size: int) -> None:
    out, records, bad = read_all(TEXT, size)
    assert out == WANT  # blank lines and lines of spaces are no records
    assert not bad and not records.has_pending and records.unfinished() is None
    assert records.chars_read == len(TEXT)


def test_a_record_being_written_is_kept_back_until_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "growing.csv"
    w = open(path, "w", buffering=1)  # noqa: SIM115  # the writer of a recording, one line at a time
    f = open(path)  # noqa: SIM115
    records = CsvRecords(f, Bad())
    w.write('x,"open\n')
    w.flush()
    assert list(records.read()) == [] and records.at_end
    assert records.has_pending
    assert records.unfinished() == "line 1 opens a quote it never closes"
    w.write('quote",y\n1,2')
    w.flush()
    assert list(records.read()) == [(1, ["x", "open\nquote", "y"])]
    assert records.unfinished() == "line 3 has no newline (truncated while being written?)"
    assert list(records.finish()) == [(3, ["1", "2"])]  # at the end of the file it is whole after all
    assert not records.has_pending and records.unfinished() is None and list(records.finish()) == []
    w.close()
    f.close()


def test_a_quote_open_at_the_last_newline_keeps_only_the_records_before_it() -> None:
    text = 'a,b\n"c\nd",e\n"f,\ng\n'  # the third record's quote is still open at the end
    records = CsvRecords(io.StringIO(text), Bad())
    assert list(records.read(len(text) + 1)) == [(1, ["a", "b"]), (2, ["c\nd", "e"])]
    assert records.unfinished() == "line 4 opens a quote it never closes"


def test_control_characters_are_stripped_as_the_text_is_read_and_crlf_reads_as_lf() -> None:
    text = "a,b\r\n\x1b[31mred\x1b[0m,\x07bell\x9b\r\n"
    out, _, bad = read_all(text, 4)
    assert out == [(1, ["a", "b"]), (2, ["[31mred[0m", "bell"])] and not bad


def test_an_overlong_record_is_reported_once_skipped_and_the_next_one_read() -> None:
    text = "a,b\n" + "x" * (MAX_RECORD + 300_000) + "\n" + "1,2\n"  # its newline comes in a later read
    out, records, bad = read_all(text, 256 << 10)
    assert bad == [(2, "is longer than 1 MiB")]
    assert out == [(1, ["a", "b"]), (3, ["1", "2"])]  # numbered as the file's lines still
    assert records.unfinished() is None


def test_an_overlong_record_without_its_newline_at_the_end_is_not_read_back() -> None:
    text = "a,b\n" + "x" * (MAX_RECORD + 10)
    out, records, bad = read_all(text, 256 << 10)
    assert bad == [(2, "is longer than 1 MiB")] and out == [(1, ["a", "b"])]
    assert not records.has_pending


def test_a_quote_that_never_closes_swallows_one_mebibyte_as_one_bad_record_not_the_file() -> None:
    lines = 1100  # a stray quote, 1.1 MB of lines of 1 000 characters, 100 000 rows: up to its last read, one record
    text = 'a,b\n"' + ("y" * 999 + "\n") * lines + "1,2\n" * 100_000
    out, records, bad = read_all(text, 256 << 10)
    assert bad == [(2, "is longer than 1 MiB")]
    assert out[0] == (1, ["a", "b"]) and out[-1] == (lines + 1 + 100_000, ["1", "2"])  # still the file's lines
    assert len([cells for _, cells in out if cells == ["1", "2"]]) > 40_000  # those after its last read
    assert records.unfinished() is None


def test_a_record_just_under_the_limit_is_read() -> None:
    cell = "z" * (FIELD_LIMIT - 10)
    text = "a\n" + cell + "\n"
    out, _, bad = read_all(text, 1 << 20)
    assert not bad and out == [(1, ["a"]), (2, [cell])]


def test_a_field_over_csvs_limit_is_reported_and_the_next_record_read() -> None:
    text = "a,b\n" + "f" * (FIELD_LIMIT + 1) + ",x\n1,2\n"
    out, _, bad = read_all(text, 1 << 20)
    assert len(bad) == 1 and bad[0][0] == 2 and bad[0][1].startswith("is not CSV: field larger than field limit")
    assert out == [(1, ["a", "b"]), (3, ["1", "2"])]


# -- read_table: a whole file, strictly ---------------------------------------------------------------


def test_read_table_gives_the_header_and_each_record_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(TEXT)
    seen: list[list[str]] = []
    header, rows = read_table(path, check_header=seen.append)
    assert header == ["a", "b", "c"] and seen == [header]
    assert rows == WANT[1:]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "{p} is empty"),
        ("\n  \n", "{p} is empty"),
        ("a,b,c\n1,2\n", "{p}: line 2 has 2 of 3 fields (truncated?)"),
        ("a,b\n1,2,3\n", "{p}: line 2 has 3 of 2 fields (truncated?)"),
        ("a,b\n1,2\n3,4", "{p}: line 3 has no newline (truncated while being written?)"),
        ('a,b\n1,"2\n3,4\n', "{p}: line 2 opens a quote it never closes"),
        ("a,b\n" + "x" * (MAX_RECORD + 300_000) + "\n", "{p}: line 2 is longer than 1 MiB"),
        ("a,b\n" + "x" * (FIELD_LIMIT + 1) + ",1\n", "{p}: line 2 is not CSV: field larger than field limit (131072)"),
    ],
)
def test_read_table_refuses_a_file_in_one_line_naming_it(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(UnreadableCsv) as info:
        read_table(path)
    assert str(info.value) == says.format(p=path)


def test_read_table_refuses_what_is_not_a_readable_file(tmp_path: Path) -> None:
    with pytest.raises(UnreadableCsv, match="^no such file: .*missing.csv$"):
        read_table(tmp_path / "missing.csv")
    with pytest.raises(UnreadableCsv, match=" is a directory, not a CSV$"):
        read_table(tmp_path)
    too_long = tmp_path / ("n" * 300 + ".csv")
    with pytest.raises(UnreadableCsv) as info:
        read_table(too_long)
    assert str(info.value) == f"cannot read {too_long}: File name too long"


def test_a_header_the_caller_refuses_stops_the_reading(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("x,y\n1\n")  # the bad second line is never reached

    def refuse(header: list[str]) -> None:
        raise UnreadableCsv(f"not ours: {header}")

    with pytest.raises(UnreadableCsv, match=r"^not ours: \['x', 'y'\]$"):
        read_table(path, check_header=refuse)


def test_after_an_overlong_record_reading_resumes_at_its_newline_read_by_read() -> None:
    """Read as ``gpudash replay --follow`` reads a file that grows: each read returns the records
    it completed, also those right after an overlong record's end, and nothing is left pending."""
    text = "a,b\n" + "x" * (MAX_RECORD + 5) + "\n1,2\n3,4\n5,6\n"
    bad = Bad()
    records = CsvRecords(io.StringIO(text), bad)
    assert list(records.read(4)) == [(1, ["a", "b"])]
    assert list(records.read(MAX_RECORD + 1)) == [] and bad == [(2, "is longer than 1 MiB")]
    assert not records.has_pending and records.unfinished() is None
    assert list(records.read(2)) == []  # more of it, still no newline: dropped
    assert list(records.read(2)) == [] and not records.has_pending and records.unfinished() is None
    assert list(records.read(6)) == [(3, ["1", "2"])]  # "x\n1,2\n": its end, then the next record at once
    assert list(records.read(4)) == [(4, ["3", "4"])]  # and the reads after it as usual
    assert list(records.read(100)) == [(5, ["5", "6"])] and records.at_end
    assert bad == [(2, "is longer than 1 MiB")]


def test_a_record_of_exactly_the_limit_is_read_once_its_newline_comes() -> None:
    record = "abcdefg," * (MAX_RECORD // 8)  # 1 MiB exactly, of small fields (the last one empty)
    assert len(record) == MAX_RECORD
    bad = Bad()
    records = CsvRecords(io.StringIO(record + "\n"), bad)
    assert list(records.read(MAX_RECORD)) == [] and not bad  # whole but for its newline: kept back
    ((line, cells),) = list(records.read(10))
    assert line == 1 and len(cells) == MAX_RECORD // 8 + 1 and not bad


@pytest.mark.parametrize("quote", ["", '"'])
def test_an_overlong_record_after_a_blank_first_line_is_reported_on_line_2(quote: str) -> None:
    text = "\n" + quote + ("y" * 999 + "\n") * 1100 + "1,2\n" * 100_000
    if not quote:  # one long line, not 1 100 short ones
        text = "\n" + "y" * (MAX_RECORD + 300_000) + "\n" + "1,2\n" * 1000
    out, _, bad = read_all(text, 256 << 10)
    assert bad[0] == (2, "is longer than 1 MiB") and len(bad) == 1
    assert out[-1] == (text.count("\n"), ["1", "2"])


def test_balanced_quotes_before_an_open_one_do_not_confuse_where_records_end() -> None:
    text = 'a,"b"\n"c\nd",e\n"f,\ng\n'  # a quoted cell, a quoted line feed, then a quote still open
    records = CsvRecords(io.StringIO(text), Bad())
    assert list(records.read(len(text) + 1)) == [(1, ["a", "b"]), (2, ["c\nd", "e"])]
    assert records.unfinished() == "line 4 opens a quote it never closes"
    records = CsvRecords(io.StringIO('a,"b"\n"c\n'), Bad())
    assert list(records.read(100)) == [(1, ["a", "b"])]
    assert records.unfinished() == "line 2 opens a quote it never closes"


def test_a_file_reads_as_utf8_with_bad_bytes_as_replacement_characters(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes("a,b\nnaïve,\xff\n".encode("latin-1").replace(b"na\xefve", "naïve".encode()))
    header, rows = read_table(path)
    assert rows == [(2, ["naïve", "\ufffd"])]


def test_a_carriage_return_is_a_control_character_not_a_line_end(tmp_path: Path) -> None:
    """A lone CR inside a row is stripped like any control character; it does not split the row
    (CRLF line ends read as LF)."""
    path = tmp_path / "t.csv"
    path.write_bytes(b'a,b\r\n1\r2,"x\ry"\r\n')
    assert read_table(path) == (["a", "b"], [(2, ["12", "xy"])])
