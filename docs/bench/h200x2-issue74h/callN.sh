#!/usr/bin/env bash
# Issue 74, session 24, call N (2 GPUs): the kernels-only window recorded by CUPTI directly
# (gpudash_job_cupti): its GPU tests first (its kernels against Kineto's; a CUDA job's record with
# --trace-every), then the DDP ResNet-50 under --trace-every 5, RUNS traced runs against RUNS bare (5; call O: 6).
set -u
. docs/bench/h200x2-issue74e/env.sh
timeout 240 python3 -m pytest -q -m gpu -n 0 -p no:cacheprovider tests/test_cupti_window_gpu.py \
  "tests/test_job_gpu.py::test_a_cuda_jobs_steps_are_timed_and_its_syncs_named_by_line" > "$OUT/gpu-tests.txt" 2>&1
rc=$?; tail -15 "$OUT/gpu-tests.txt"; [ $rc = 0 ] || exit $rc
timeout $((585 - SECONDS)) python3 -m benchmarks run torchrun_windows -p job=benchmarks/jobs/ddp_resnet_job.py,--bucket-view,--steps,400 \
  -p runs=${RUNS:-5} -p bare=${RUNS:-5} -p out=/tmp/tw --out /tmp/twres > "$OUT/windows.txt" 2>&1
echo "exit $?" >> "$OUT/windows.txt"
cp /tmp/twres/torchrun_windows.result.json "$OUT/windows.result.json" 2>/dev/null
(cd /tmp && find tw -name '*.csv' -o -name '*.log' -o -name '*.json' | grep -v traces | tar czf "$OUT/tw.tgz" -T - twres 2>/dev/null)
ls /tmp/tw/*/ 2>/dev/null | head -3; find /tmp/tw -path '*traces*' -name '*.json' | head -2 | xargs -r ls -la
tail -10 "$OUT/windows.txt"
echo "after ${SECONDS}s"
