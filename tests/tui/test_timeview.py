"""The charts' time window (wheel zoom) and the nearest-point lookup behind a click's readout."""

from __future__ import annotations

import pytest

from gpudash.tui.plotext_adapter import column_to_x
from gpudash.tui.series import Series
from gpudash.tui.timeview import MIN_SPAN_S, ZOOM_IN, ZOOM_OUT, TimeView


def test_unzoomed_the_window_is_the_whole_range():
    view = TimeView()
    assert view.window(3.0, 50.0) == (3.0, 50.0)
    assert "whole run" in view.describe(3.0, 50.0)


def test_zoom_keeps_the_time_under_the_cursor_in_place():
    view = TimeView()
    view.zoom(25.0, ZOOM_IN, 0.0, 100.0)  # the cursor at a quarter of the window
    a, b = view.window(0.0, 100.0)
    assert b - a == pytest.approx(80.0)
    assert (25.0 - a) / (b - a) == pytest.approx(0.25)
    assert "80.0 s of 100 s" in view.describe(0.0, 100.0)


def test_zoomed_in_the_middle_the_window_stays_while_data_arrives():
    view = TimeView()
    view.zoom(50.0, 0.5, 0.0, 100.0)
    assert view.window(0.0, 100.0) == pytest.approx((25.0, 75.0))
    assert view.window(0.0, 130.0) == pytest.approx((25.0, 75.0))
    # a live window that dropped its oldest points: the view moves to what is still kept
    assert view.window(40.0, 130.0) == pytest.approx((40.0, 90.0))


def test_zoomed_at_the_right_edge_the_window_follows_new_data():
    view = TimeView()
    view.zoom(100.0, 0.5, 0.0, 100.0)
    assert view.window(0.0, 100.0) == pytest.approx((50.0, 100.0))
    assert view.window(0.0, 160.0) == pytest.approx((110.0, 160.0))
    assert "following the newest samples" in view.describe(0.0, 160.0)


def test_zooming_out_past_the_whole_range_resets_and_in_stops_at_a_minimum():
    view = TimeView()
    view.zoom(50.0, ZOOM_IN, 0.0, 100.0)
    view.zoom(50.0, ZOOM_OUT, 0.0, 100.0)
    view.zoom(50.0, ZOOM_OUT, 0.0, 100.0)
    assert not view.zoomed and view.window(0.0, 100.0) == (0.0, 100.0)
    for _ in range(40):
        view.zoom(50.0, ZOOM_IN, 0.0, 100.0)
    a, b = view.window(0.0, 100.0)
    assert b - a == pytest.approx(MIN_SPAN_S) and a <= 50.0 <= b
    view.reset()
    assert view.window(0.0, 100.0) == (0.0, 100.0)


def test_nearest_point_in_the_window():
    s = Series(maxlen=10)
    for t, v in ((1.0, 10.0), (2.0, 20.0), (3.0, None), (4.0, 40.0)):
        s.append(t, v)
    assert s.nearest(2.4, 0.0, 10.0) == (2.0, 20.0)
    assert s.nearest(3.1, 0.0, 10.0) == (4.0, 40.0)  # the gap (None) is no point
    assert s.nearest(9.0, 0.0, 10.0) == (4.0, 40.0)
    assert s.nearest(1.0, 1.5, 10.0) == (2.0, 20.0)  # outside the window: not offered
    assert s.nearest(5.0, 5.0, 10.0) is None
    assert Series().nearest(1.0, 0.0, 2.0) is None


def test_a_column_maps_back_to_the_time_plotext_drew_there():
    cols = range(5, 55)  # 50 data columns after a 5-column y axis
    assert column_to_x(5, cols, (10.0, 60.0)) == 10.0
    assert column_to_x(54, cols, (10.0, 60.0)) == 60.0
    assert column_to_x(0, cols, (10.0, 60.0)) == 10.0  # on the axis labels: the edge
    # plotext puts x at column floor(0.5 + (n - 1) * (x - x0) / (x1 - x0)): the inverse lands on it
    x = column_to_x(30, cols, (10.0, 60.0))
    assert int(0.5 + 49 * (x - 10.0) / 50.0) + 5 == 30
