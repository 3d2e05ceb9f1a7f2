#!/usr/bin/env bash
# Issue 74, session 24, call O (2 GPUs): call N's script again, 6 traced runs against 6 bare, CUPTI
# now finalized after each window (call N left it attached: the steps between windows ran slower).
RUNS=6 exec bash docs/bench/h200x2-issue74h/callN.sh
