"""Issue 89: each ``gpudash diagnose --json`` of a pair's job in a few lines — the rank its head
names (``waiting_for``), whose evidence it is, the rank's own verdict, the straggler line and the
remedies' "up to". Usage: python docs/bench/h200x2-issue89/verdicts.py /tmp/r/diagnose-*.json"""

import json
import sys
from pathlib import Path

for path in map(Path, sys.argv[1:]):
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"{path.stem}: no verdict ({type(exc).__name__})")
        continue
    w = d.get("waiting_for")
    named = (
        f"waiting for rank {w['rank']}: {w['own_ms']:.1f} ms against {w['others_own_ms']:.1f} ms, up to {w['up_to']:.2f}×"
        if w
        else "names no rank"
    )
    print(f"{path.stem}: {named}; evidence rank {d.get('evidence_rank')} of {d.get('ranks')}")
    print(f"  {d.get('bound')}: {d.get('why')}\n  {d.get('straggler') or 'no straggler line'}")
    for r in d.get("remedies", []):
        print(f"  up to {r['up_to']:.2f}× ({r['limit']})")
