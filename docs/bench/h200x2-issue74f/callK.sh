#!/usr/bin/env bash
# Issue 74, session 22, call K (2 GPUs alone): 5 traced runs against 5 bare again (the windows'
# code as in session 21's calls A and B), to be pooled with theirs.
set -u
. docs/bench/h200x2-issue74e/env.sh
windows
echo "after ${SECONDS}s"
