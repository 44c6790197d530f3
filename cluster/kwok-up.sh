#!/usr/bin/env bash
# kwok beside the control plane of `cluster/up.sh RUN_DIR`, built by `make kwok-bin`: it plays
# every node annotated `kwok.x-k8s.io/node: fake` and the pods bound to them, as
# cluster/kwok/stages.yaml says (a node Ready, a bound pod Running and Ready with its readiness
# gates True, a deleted pod gone at once). No heartbeats and no node Leases. It listens on no
# port: no kubelet API, no metrics. Its client has no rate limit of its own (kwok's), so the
# limits that count at scale are the control plane's (cluster/up.sh raises them).
#
# In the background by default: its pid added to RUN_DIR/pids, so that cluster/down.sh stops it
# with the rest, its log in RUN_DIR/logs/kwok.log; returns once it watches the nodes. With
# --foreground it runs in place of this script, logging to its output (a test that starts and
# stops it itself).
#
#   cluster/kwok-up.sh [RUN_DIR] [--foreground]    (default target/cluster/run)
set -euo pipefail
cd "$(dirname "$0")/.."
kwok=$PWD/target/cluster/bin/kwok
run=$(realpath -m "${1:-target/cluster/run}")
ready_seconds=${CLUSTER_READY_SECONDS:-90}

[ -x "$kwok" ] || { echo "$kwok not built: run make kwok-bin" >&2; exit 1; }
[ -f "$run/kubeconfig" ] || { echo "no cluster runs from $run: cluster/up.sh $run starts one" >&2; exit 1; }

args=(
  --kubeconfig "$run/kubeconfig"
  # Only the stages of this file: without --config kwok would read ~/.kwok/kwok.yaml.
  --config "$PWD/cluster/kwok/stages.yaml"
  --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake
  # 0 turns node Leases off (in a config file 0 means kwok's default, 40 s): nothing here reads
  # them, and at thousands of nodes their renewals would be most of kwok's writes.
  --node-lease-duration-seconds 0
  # Pod IPs: kwok's default /24 holds 254, the benchmarks run tens of thousands of pods. Clear of
  # the Service range (10.96.0.0/16) and cluster/node-up.sh's node (10.98.0.0/24, 10.99.0.1).
  --cidr 10.0.0.0/16
)

if [ "${2:-}" = --foreground ]; then
  exec "$kwok" "${args[@]}"
fi

if grep -q '^kwok ' "$run/pids" 2>/dev/null; then
  echo "kwok already runs for $run: cluster/down.sh $run stops it with the cluster" >&2
  exit 1
fi
mkdir -p "$run/logs" "$run/args"
printf '%s\0' "${args[@]}" > "$run/args/kwok"
"$kwok" "${args[@]}" >> "$run/logs/kwok.log" 2>&1 &
pid=$!
echo "kwok $pid" >> "$run/pids"
# Ready once it has listed the nodes through the API server and starts watching them.
for _ in $(seq $((ready_seconds * 5))); do
  grep -q 'Watch nodes' "$run/logs/kwok.log" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
if ! kill -0 "$pid" 2>/dev/null || ! grep -q 'Watch nodes' "$run/logs/kwok.log"; then
  echo "kwok not ready within ${ready_seconds}s; its log:" >&2
  tail -20 "$run/logs/kwok.log" >&2
  kill "$pid" 2>/dev/null
  sed -i '/^kwok /d' "$run/pids"
  exit 1
fi
echo "kwok up: it plays the nodes annotated kwok.x-k8s.io/node=fake of $run/kubeconfig; cluster/down.sh $run stops it"
