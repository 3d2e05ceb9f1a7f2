"""The one reader of numbers another process or a file wrote (``gpudash.core.lenient``): whatever
stands there, a finite number or the default, never an exception or a NaN."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpudash.core.lenient import count_or, float_or, float_or_none, int_or, int_or_none
from gpudash.core.memory_kinds import size

ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(ANYTHING)
def test_a_float_read_is_finite_or_none_and_an_int_read_whole_or_the_default(value: Any) -> None:
    number = float_or_none(value)
    assert number is None or math.isfinite(number)
    assert float_or(value, -1.0) == (-1.0 if number is None else number)
    assert float_or(value, -1.0, within=10.0) in ((-1.0,) if number is None or abs(number) >= 10 else (number,))
    whole = int_or_none(value)
    assert int_or(value, -7) == (-7 if whole is None else whole)
    counted = count_or(value, -1)
    assert counted == -1 or (type(counted) is int and counted >= 0 and counted == value)


def test_each_reads_what_a_message_or_a_cell_holds() -> None:
    assert (float_or_none("2.5"), float_or_none(""), float_or_none("nan"), float_or_none(10**400)) == (
        2.5,
        None,
        None,
        None,
    )
    assert (int_or("12"), int_or(12.9), int_or("12.5", 3), int_or(None, 4)) == (12, 12, 3, 4)
    assert (count_or(5), count_or(True, 9), count_or(-2, 9), count_or(5.0, 9), count_or("5", 9)) == (5, 9, 9, 9, 9)


def test_bytes_are_written_one_way_everywhere() -> None:
    assert [size(n) for n in (64, 812 * 1024, 850 * 2**20, 1007 * 2**20, 2**30, 41.2 * 2**30, 2000 * 2**30)] == [
        "64 B",
        "812 KiB",
        "850 MiB",
        "1007 MiB",  # not 1.01e+03
        "1 GiB",
        "41.2 GiB",
        "2000 GiB",
    ]
