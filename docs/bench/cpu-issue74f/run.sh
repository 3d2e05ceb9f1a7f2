#!/usr/bin/env bash
# Issue 74 on the CPU (session 22): gpudash diagnose of two user scripts, before this session's
# change (GPUDASH_SRC=<a checkout of 29760ea>) and after (this checkout): a loop that sleeps 10 ms a
# step, and a gloo DDP job of 3 ranks with rank 2 (or none) sleeping 20 ms before each batch.
# bash docs/bench/cpu-issue74f/run.sh OUTDIR   (GPUDASH_SRC=... for "before")
set -u
out=$1; mkdir -p "$out"; here=docs/bench/cpu-issue74f
src=${GPUDASH_SRC:-$PWD}
run() {  # NAME CMD...: diagnose's verdict (stdout) into OUTDIR/NAME.txt
  local name=$1; shift
  (cd "$src" && PYTHONPATH="$src" python3 -m gpudash diagnose -- "$@") > "$out/$name.txt" 2>/dev/null
  echo "$name: $(head -c 400 "$out/$name.txt")"
}
run loop python3 "$PWD/$here/sleepy_loop.py"
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 3"
run rank2-late $TR "$PWD/$here/ddp_sleepy_rank.py" --slow 2 --epochs 30
run even $TR "$PWD/$here/ddp_sleepy_rank.py" --slow -1 --epochs 30
