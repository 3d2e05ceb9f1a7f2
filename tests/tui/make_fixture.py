"""Regenerate ``data/replay.csv`` (+ ``.json``): a short synthetic GPU run with three changes; with
``--gpm``, ``data/replay-gpm.csv``: the same run on a synthetic Hopper, with GPM's figures and model
FLOPs (MFU).

    .venv/bin/python -m tests.tui.make_fixture [--gpm]

Uses the real ``CsvRecorder`` (the format of ``gpudash --record``) over ``SyntheticSource``
with a fake clock, so the file is the same every time (except the metadata's timestamps).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpudash.core.protocol import Control, RunConfig, SetBatchSize, SetVariant
from gpudash.recording.metadata import run_metadata
from gpudash.recording.record import CsvRecorder
from gpudash.tui.demo import SyntheticSource

HERE = Path(__file__).parent / "data"


def record(path: Path, gpm: bool = False) -> None:
    """The synthetic run into ``path`` (and its metadata beside it), as ``gpudash --record`` would."""
    t = [0.0]
    src = SyntheticSource(RunConfig(workload="encdec"), gpu=True, clock=lambda: t[0], startup_s=1.0, gpm=gpm)
    rec = CsvRecorder(str(path), run_metadata(src.config, src.gpu_info, device="cuda:0"))
    src.start()
    script: dict[float, Control] = {12.0: SetVariant("pipelined"), 24.0: SetBatchSize(16), 36.0: SetVariant("serial")}
    while t[0] < 48.0:
        t[0] = round(t[0] + 0.25, 2)
        if t[0] in script:
            src.send(script[t[0]])
        for m in src.poll():
            rec.on_message(m)
    rec.close()


def main() -> None:
    gpm = "--gpm" in sys.argv[1:]
    path = HERE / ("replay-gpm.csv" if gpm else "replay.csv")
    record(path, gpm)
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta.update(
        hostname="fixture",
        start_time="2026-01-01T00:00:00+00:00",
        end_time="2026-01-01T00:00:48+00:00",
        gpudash_version="fixture",
    )
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")


if __name__ == "__main__":
    main()
