"""Issue 74, session 22: each ``gpudash diagnose --json`` of call H in a few lines — the verdict,
the straggler line, the remedies' "up to" and the one-rank check.

python docs/bench/h200x2-issue74f/verdicts.py /tmp/r/diagnose-*.json
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
    lines = [f"{path.stem}: {d.get('bound')}: {d.get('why')}"]
    lines.append(f"  {d.get('straggler') or 'no straggler line'}")
    lines += [f"  up to {r['up_to']:.2f}× ({r['limit']})" for r in d.get("remedies", [])]
    lines += [f"  {c['line']}" for c in d.get("checks", [])]
    return lines


def main() -> None:
    for name in sys.argv[1:]:
        print("\n".join(summary(Path(name))))


if __name__ == "__main__":
    main()
