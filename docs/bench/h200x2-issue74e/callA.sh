#!/usr/bin/env bash
# Issue 74, session 21, call A (2 GPUs alone): every multigpu test (the NCCL timing test times every
# step, with BatchNorm buffers DDP broadcasts), then 5 traced runs against 5 bare with a step's
# collectives timed at most every 0.1 s.
set -u
. docs/bench/h200x2-issue74e/env.sh
timeout 220 python3 -m pytest -q -o addopts="" -p no:cacheprovider -m multigpu tests/test_comm_times_nccl.py tests/test_ddp_multigpu.py > "$OUT/multigpu.txt" 2>&1
echo "exit $? after ${SECONDS}s" >> "$OUT/multigpu.txt"; tail -4 "$OUT/multigpu.txt"
windows
