"""Issue 89: each ``gpudash diagnose --json`` of a pair's job in a few lines — the rank its head
names (``waiting_for``), whose evidence it is, the rank's own verdict, the straggler line and the
remedies' "up to".

python docs/bench/h200x2-issue89/verdicts.py /tmp/r/diagnose-*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def summary(path: Path) -> list[str]:
    """One diagnosis' lines (or why it has none)."""
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return [f"{path.stem}: no verdict ({type(exc).__name__})"]
    waiting = d.get("waiting_for")
    head = (
        f"waiting for rank {waiting['rank']}: {waiting['own_ms']:.1f} ms against {waiting['others_own_ms']:.1f} ms, "
        f"up to {waiting['up_to']:.2f}×"
        if waiting
        else "names no rank"
    )
    lines = [f"{path.stem}: {head}; evidence rank {d.get('evidence_rank')} of {d.get('ranks')}"]
    lines.append(f"  {d.get('bound')}: {d.get('why')}")
    lines.append(f"  {d.get('straggler') or 'no straggler line'}")
    lines += [f"  up to {r['up_to']:.2f}× ({r['limit']})" for r in d.get("remedies", [])]
    return lines


def main() -> None:
    for name in sys.argv[1:]:
        print("\n".join(summary(Path(name))))


if __name__ == "__main__":
    main()
