#!/usr/bin/env bash
# Issue 74, session 25, call B (2 GPUs): call A's script over the window as it then became — one
# warm-up step before its steps (CUPTI attaches in it, nothing kept) — with 5 traced runs against 5 bare.
RUNS=5 exec bash docs/bench/h200x2-issue74i/callA.sh
