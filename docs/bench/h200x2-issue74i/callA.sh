#!/usr/bin/env bash
# Issue 74, session 25, call A (2 GPUs): the GPU-only window with the CUDA calls' records turned off
# in torch's own CUPTI (torch 2.11: no per-kind selection). Its GPU tests first (its kernels against a
# full window's, no CUDA call recorded; a CUDA job's record), then window_cost.py (a traced step over
# an untraced one, calls off against kept, alternated in one process), then the DDP ResNet-50 under
# --trace-every 5 against bare, interleaved, in the time left (call B adds runs to these).
set -u
. docs/bench/h200x2-issue74e/env.sh
timeout 240 python3 -m pytest -q -m gpu -n 0 -p no:cacheprovider tests/test_window_kinds_gpu.py \
  "tests/test_job_gpu.py::test_a_cuda_jobs_steps_are_timed_and_its_syncs_named_by_line" > "$OUT/gpu-tests.txt" 2>&1
rc=$?; tail -15 "$OUT/gpu-tests.txt"; [ $rc = 0 ] || exit $rc
timeout 150 $TR docs/bench/h200x2-issue74i/window_cost.py --windows 10 > "$OUT/window_cost.jsonl" 2> "$OUT/window_cost.err"
echo "window_cost exit $?"; cut -c1-200 "$OUT/window_cost.jsonl"; tail -3 "$OUT/window_cost.err"
timeout $((585 - SECONDS)) python3 -m benchmarks run torchrun_windows -p job=benchmarks/jobs/ddp_resnet_job.py,--bucket-view,--steps,400 \
  -p runs=${RUNS:-4} -p bare=${RUNS:-4} -p out=/tmp/tw --out /tmp/twres > "$OUT/windows.txt" 2>&1
echo "exit $?" >> "$OUT/windows.txt"
cp /tmp/twres/torchrun_windows.result.json "$OUT/windows.result.json" 2>/dev/null
(cd /tmp && find tw -name '*.csv' -o -name '*.log' -o -name '*.json' | grep -v traces | tar czf "$OUT/tw.tgz" -T - twres 2>/dev/null)
tail -8 "$OUT/windows.txt"
echo "after ${SECONDS}s"
