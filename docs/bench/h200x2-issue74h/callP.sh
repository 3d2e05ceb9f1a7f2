#!/usr/bin/env bash
# Issue 74, session 24, call P (2 GPUs, the 231 s of device time left): on the same host as call O,
# the DDP ResNet-50 bare and under gpudash record without windows (the hooks alone), alternated twice.
export PYTHONPATH=/tmp/site:$PWD; ls /tmp/site >/dev/null 2>&1 || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl; TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"; J="benchmarks/jobs/ddp_resnet_job.py --bucket-view --steps 400"; for i in 1 2; do timeout 45 $TR $J 2>/dev/null | grep "steps_per_s" | tail -1 | sed "s/^/bare $i: /"; timeout 50 python3 -m gpudash record /tmp/h$i.csv --force -q -- $TR $J 2>/dev/null | grep "steps_per_s" | tail -1 | sed "s/^/hooks $i: /"; done; echo "after $SECONDS s"
