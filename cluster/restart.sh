#!/usr/bin/env bash
# Restarts one component of the control plane cluster/up.sh started from RUN_DIR, with the same
# arguments (so on the same port): what a test of a kube-apiserver restart needs.
#
#   cluster/restart.sh RUN_DIR NAME     (NAME: etcd, kube-apiserver, kube-scheduler, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
run=$(realpath -m "$1")
name=$2
pid=$(awk -v name="$name" '$1 == name { print $2 }' "$run/pids")
[ -n "$pid" ] || { echo "$name was not started from $run" >&2; exit 1; }
kill "$pid" 2>/dev/null || true
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
kill -9 "$pid" 2>/dev/null || true
mapfile -d '' args < "$run/args/$name"
"$PWD/target/cluster/bin/$name" "${args[@]}" >> "$run/logs/$name.log" 2>&1 &
awk -v name="$name" -v pid=$! '$1 == name { $2 = pid } { print }' "$run/pids" > "$run/pids.new"
mv "$run/pids.new" "$run/pids"
echo "$name restarted (pid $!)"
