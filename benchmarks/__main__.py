"""``python -m benchmarks``: list, run and compare the cases, and build docs/BENCHMARKS.md
(``benchmarks.harness.cli``)."""

from __future__ import annotations

import sys

from benchmarks.harness.cli import main

sys.exit(main())
