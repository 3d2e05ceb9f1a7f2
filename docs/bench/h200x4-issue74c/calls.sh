# Sourced by run2.sh and run3.sh (shared after calls 3 and 4 ran them; each call's settings are its
# script's): diagnose and record a job into $DIR, each with its time limit; $DIAGNOSE_FLAGS beside
# --json, the recordings' CSVs in $CSV_DIR.
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
