#!/usr/bin/env bash
# Issue 74, session 22, call I (2 GPUs alone, after call H): every multigpu test, then what gpudash
# costs a DDP of short steps (../h200x2-issue74e/callG.sh, four rounds in the time left).
set -u
. docs/bench/h200x2-issue74e/env.sh
timeout 200 python3 -m pytest -q -o addopts="" -p no:cacheprovider -m multigpu tests/test_comm_times_nccl.py tests/test_ddp_multigpu.py > "$OUT/multigpu.txt" 2>&1
echo "exit $? after ${SECONDS}s" >> "$OUT/multigpu.txt"; tail -4 "$OUT/multigpu.txt"
ROUNDS=4 bash docs/bench/h200x2-issue74e/callG.sh
