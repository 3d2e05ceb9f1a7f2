#!/usr/bin/env bash
# Drive the dashboard in tmux as a user would, and save what the screen showed at each step.
#   benchmarks/tui_tmux_tour.sh OUTDIR [gpudash args...]
# Launch, wait for samples, toggle pipelining (p), double the batch (+), record (c ⏎ … c), quit (q).
set -u
out=${1:?usage: tui_tmux_tour.sh OUTDIR [gpudash args...]}; shift
mkdir -p "$out"
s=gpudash-tour
tmux kill-session -t $s 2>/dev/null
tmux new-session -d -s $s -x 120 -y 36 "cd '$PWD' && python3 -m gpudash $*; echo EXIT=\$?; sleep 30"
log="$out/tui_tour.txt"; : > "$log"
shot() { sleep "$1"; { echo "===== $2 (after ${1}s) ====="; tmux capture-pane -p -t $s; } >> "$log"; }
shot 2 01-first-frame
shot 14 02-running
tmux send-keys -t $s p;  shot 12 03-pipelined
tmux send-keys -t $s +;  shot 12 04-batch-doubled
tmux send-keys -t $s c;  sleep 1; tmux send-keys -t $s Enter; shot 6 05-recording
tmux send-keys -t $s c;  shot 2 06-recording-stopped
tmux send-keys -t $s q;  shot 5 07-quit
{ echo "===== processes left after quit ====="; pgrep -af "multiprocessing.spawn|gpudash" | grep -v tui_tmux_tour || echo none; } >> "$log"
tmux kill-session -t $s 2>/dev/null
