#!/usr/bin/env bash
# Issue 74's fourth device call (1 GPU): the input's hand-over — diagnose and tune on a ResNet-50
# whose 4 persistent workers hand over 77 MB batches of ready fp16 images.
set -u
export PYTHONUNBUFFERED=1
JOB="benchmarks/jobs/resnet_persistent.py --ready-images --batch 256 --workers 4 --warmup 20 --eval-every 0 --save-every 0"  # was benchmarks/jobs/resnet_handover_job.py before the scripts merged
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt; nproc >> $OUT/gpu.txt
timeout 150 python3 -m gpudash diagnose --json -- python3 $JOB --steps 3000 > $OUT/handover-diagnose.json 2> $OUT/handover-diagnose.err
echo "exit $?" >> $OUT/handover-diagnose.err
timeout 330 python3 -m gpudash tune --seconds 8 --max-minutes 5 --json --out /tmp/tune -- python3 $JOB --steps 100000 > $OUT/handover-tune.json 2> $OUT/handover-tune.err
echo "exit $?" >> $OUT/handover-tune.err
ls -la $OUT
