"""The other nodes of a torchrun run, for ``gpudash replay NODE0.csv NODE1.csv …``.

A job that spans machines is recorded by one gpudash a node (``gpudash.ranks.world``). The replay
shows the first recording as it is and joins the other nodes' ``rank`` rows into it: each file
must name the same run (its "world" event's rendezvous id), and each other node's rows are moved
onto the first recording's clock by the difference of the two clocks' zeros. Textual- and
torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gpudash.core.protocol import WORLD, Event, EventKind, RankSample
from gpudash.core.textfmt import strip_controls
from gpudash.core.world_event import facts_of
from gpudash.recording.csvread import open_csv
from gpudash.recording.replay import NotARecording, RecordingReader


def _world(path: str, ranks: list[RankSample] | None) -> Event:
    """The recording's world event (and, into ``ranks``, its rank rows: the whole file is read);
    ``NotARecording`` where it has none."""
    name = strip_controls(path)
    found: Event | None = None
    with open_csv(path) as f:
        reader = RecordingReader(f, path)
        while True:
            batch = reader.read()
            if reader.records.at_end:
                batch += reader.finish()
            for m in batch:
                if isinstance(m, Event) and m.kind == EventKind.MEASURED and m.what == WORLD and found is None:
                    found = m
                elif isinstance(m, RankSample) and ranks is not None:
                    ranks.append(m)
            if reader.records.at_end or (found is not None and ranks is None):
                break
    if found is None or facts_of(found).clock_unix is None:
        raise NotARecording(f"{name} names no torchrun run (no world event): it cannot be joined as a node")
    return found


def joined_ranks(main: str, nodes: Sequence[str]) -> list[RankSample]:
    """The rank rows of ``nodes``' recordings on ``main``'s clock, oldest first. Raises
    ``NotARecording`` (one line) for a file that is not a recording of the same torchrun run."""
    if not nodes:
        return []
    first = _world(main, None)
    zero = facts_of(first).clock_unix or 0.0
    out: list[RankSample] = []
    for path in nodes:
        ranks: list[RankSample] = []
        other = _world(path, ranks)
        if other.after != first.after:
            raise NotARecording(
                f"{strip_controls(path)} is of run {strip_controls(other.after)}, not {strip_controls(first.after)}: "
                "only the nodes of one run are joined"
            )
        shift = (facts_of(other).clock_unix or 0.0) - zero
        out += [dataclasses.replace(r, time_s=r.time_s + shift) for r in ranks if r.time_s + shift >= 0]
    return sorted(out, key=lambda r: r.time_s)
