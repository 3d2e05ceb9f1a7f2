# Sourced by run2.sh, run3.sh and run4.sh here and by ../h200x4-issue74d (shared after the calls ran them; each call's settings are its
# script's): diagnose and record a job into $DIR, each with its time limit; $DIAGNOSE_FLAGS beside
# --json, the recordings' CSVs in $CSV_DIR.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"  # what comes back from the device
export PYTHONUNBUFFERED=1
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"  # a pair's job, its own rendezvous
diagnose() {  # NAME ARGS...: the verdict's JSON and stderr
  local name=$1; shift
  timeout "$DIAGNOSE_S" python3 -m gpudash diagnose --json $DIAGNOSE_FLAGS -- "$@" > "$DIR/diagnose-$name.json" 2> "$DIR/diagnose-$name.err"
  echo "exit $?" >> "$DIR/diagnose-$name.err"
}
record() {  # NAME ARGS...: the record's output (its straggler lines)
  local name=$1; shift
  timeout "$RECORD_S" python3 -m gpudash record "$CSV_DIR/$name.csv" --force -- "$@" > "$DIR/record-$name.txt" 2>&1
  echo "exit $?" >> "$DIR/record-$name.txt"
}
tagged() {  # FILE TAG SECONDS CMD...: CMD's JSON lines into FILE, each opened with TAG ('"round": 1, '), its stderr in FILE.err
  local file=$1 tag=$2 seconds=$3; shift 3
  timeout "$seconds" "$@" 2>>"$file.err" | grep '^{' | sed "s/^{/{$tag/" >> "$file"
}
