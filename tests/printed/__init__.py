"""The lines gpudash prints, read back by their parts, for the tests (issue 72: never red on a busy machine).

gpudash adds parts to its lines that depend on the machine: a ``noisy: …`` clause or a ``⚠ noisy``
mark when something else competed for the CPU, ``too short``/``too few`` where a loaded run got
fewer samples than an interval needs, ``(no CI)`` in place of an interval, thousands separators
(``1,234``) and ``k`` (``12.5k``) as a figure grows. A test that matches a whole line with one
pattern fails on any of them; these readers parse each shape into typed parts, accept every
optional part gpudash may add (and an unknown clause, kept in ``others``), and return ``None``
for a line that is not of the shape, so that a test asserts on what it means to check.

This package is their one facade (``from tests import printed``; ``printed.summary(line)``), over
three modules by what they read (their writers in gpudash in brackets):

- ``figures``: ``Figure`` (``502 ± 9``, ``40,800 ± 1,500``, ``48.2 (no CI)``, ``–``:
  ``core.textfmt.plain_pm``, ``stats.fmt.fmt_pm``), ``Summary`` (a configuration's summary line,
  also a CSV summary row's message: ``stats.segments.Segment.summary``), ``Progress``
  (``record``'s line every 10 s: ``recording.headless.progress_line``);
- ``verdicts``: ``Compared`` (a ratio, its interval and verdict, with or without ``⚠ noisy``:
  ``stats.fmt.fmt_ratio``, ``report.command.fmt_comparison``), ``Change`` (``stats.fmt.fmt_change``),
  ``Versus`` (``report.ab.Pair.sentence``), ``SweepLine`` (``sweep.report.summary_line``, the sweep's
  and tune's ``describe``), ``table_rows``/``cells`` (report.md, sweep.md, tune.md) and
  ``time_account`` (``sweep.timing``'s "Where the time went");
- ``events``: ``EventLine`` (``[  12.3s] measured: …``), ``Goodput`` (``job.wall_time.phases_line``),
  ``Done`` (a recording's last line: ``recording.headless.HeadlessRecording.report``) and the
  straggler verdicts (``ranks.own_work.judge``).

``tests/test_printed.py`` checks each against lines gpudash's own formatters write.
"""

from tests.printed.events import (
    Done,
    EventLine,
    Goodput,
    done_line,
    event_line,
    event_lines,
    goodput,
    goodputs,
    last_done,
    no_straggler,
    stragglers,
)
from tests.printed.figures import (
    FIGURE,
    MINUS,
    NOISY_MARK,
    NUMBER,
    Figure,
    Progress,
    Summary,
    figure,
    number,
    progress,
    progress_lines,
    seconds,
    summaries,
    summary,
)
from tests.printed.verdicts import (
    VERDICTS,
    Change,
    Compared,
    SweepLine,
    Versus,
    cells,
    change,
    compared,
    sweep_line,
    table_rows,
    time_account,
    verdict,
    versus,
    versus_lines,
    without_noisy_mark,
)

__all__ = [
    "FIGURE",
    "MINUS",
    "NOISY_MARK",
    "NUMBER",
    "VERDICTS",
    "Change",
    "Compared",
    "Done",
    "EventLine",
    "Figure",
    "Goodput",
    "Progress",
    "Summary",
    "SweepLine",
    "Versus",
    "cells",
    "change",
    "compared",
    "done_line",
    "event_line",
    "event_lines",
    "figure",
    "goodput",
    "goodputs",
    "last_done",
    "no_straggler",
    "number",
    "progress",
    "progress_lines",
    "seconds",
    "stragglers",
    "summaries",
    "summary",
    "sweep_line",
    "table_rows",
    "time_account",
    "verdict",
    "versus",
    "versus_lines",
    "without_noisy_mark",
]
