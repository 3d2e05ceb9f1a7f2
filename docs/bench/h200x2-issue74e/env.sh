# Sourced by this folder's call scripts: where the call's outputs go ($OUT, which comes back), the
# machine's description (env.txt), the pair's torchrun ($TR) and the shared record/tagged helpers.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
R=/tmp/r; mkdir -p $R
DIR=$R CSV_DIR=$R RECORD_S=100
. docs/bench/h200x4-issue74c/calls.sh  # TR, record, tagged
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nvidia-smi topo -m
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; nproc; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env.txt" 2>&1
windows() {  # 5 traced runs against 5 bare of the DDP ResNet-50 job, interleaved, in what time is left
  timeout $((585 - SECONDS)) python3 -m benchmarks run torchrun_windows -p job=benchmarks/jobs/ddp_resnet_job.py,--bucket-view,--steps,400 \
    -p runs=5 -p bare=5 -p out=/tmp/tw --out /tmp/twres > "$OUT/windows.txt" 2>&1
  echo "exit $?" >> "$OUT/windows.txt"
  cp /tmp/twres/torchrun_windows.result.json "$OUT/windows.result.json"
  (cd /tmp && find tw -name '*.csv' -o -name '*.log' -o -name '*.json' | grep -v traces | tar czf "$OUT/tw.tgz" -T - twres 2>/dev/null)
  tail -6 "$OUT/windows.txt"
}
