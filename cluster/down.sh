#!/usr/bin/env bash
# Stops what cluster/up.sh (and cluster/kwok-up.sh, and the stand-ins it was given) started from
# RUN_DIR, then removes its state. Each process gets a TERM, then after 10 seconds a KILL.
#
#   cluster/down.sh [RUN_DIR]    (default target/cluster/run)
set -uo pipefail
cd "$(dirname "$0")/.."
run=$(realpath -m "${1:-target/cluster/run}")
[ -f "$run/pids" ] || { echo "no cluster runs from $run"; exit 0; }
pids=$(awk '{ print $2 }' "$run/pids")
alive() { for pid in $pids; do kill -0 "$pid" 2>/dev/null && return 0; done; return 1; }
kill $pids 2>/dev/null
for _ in $(seq 50); do
  alive || break
  sleep 0.2
done
kill -9 $pids 2>/dev/null
rm -rf "$run"
echo "cluster down: stopped $(echo $pids | wc -w) processes, removed $run"
