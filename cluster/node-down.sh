#!/usr/bin/env bash
# Stops the node cluster/node-up.sh started in NODE_DIR: the kubelet, every container through
# containerd, the other processes by the ids node-up.sh kept, then any process left in the node's
# network namespace (containerd's shims), the cgroups runc made, and the node's files. Its mounts
# (the kubelet's root among them) were made in the node's own mount namespace, which goes with its
# last process. The Node object is deleted while the API server still answers.
#
#   cluster/node-down.sh NODE_DIR [KUBECONFIG]
set -uo pipefail
node=$(realpath -m "$1")
[ -f "$node/pids" ] || exit 0
pid_of() { awk -v name="$1" '$1 == name { print $2 }' "$node/pids"; }
# The kubelet first, so that it restarts nothing; then every container, pods' sandboxes included,
# killed and deleted by containerd (runc's processes outlive containerd and its shims).
kubelet=$(pid_of kubelet)
kill "$kubelet" 2>/dev/null
for _ in $(seq 50); do kill -0 "$kubelet" 2>/dev/null || break; sleep 0.2; done
ctr=(ctr --address "$node/containerd.sock" --namespace k8s.io)
for task in $(timeout 30 "${ctr[@]}" tasks ls -q 2>/dev/null); do
  timeout 30 "${ctr[@]}" tasks delete --force "$task" >/dev/null 2>&1
done
# Then the rest, newest first: containerd, which holds the namespaces, last.
tac "$node/pids" | while read -r _ pid; do kill "$pid" 2>/dev/null; done
netns=$(cat "$node/netns" 2>/dev/null)
for _ in $(seq 50); do
  left=()
  for pid in $(awk '{ print $2 }' "$node/pids"); do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
  if [ -n "$netns" ]; then
    for ns in /proc/[0-9]*/ns/net; do
      [ "$(readlink "$ns" 2>/dev/null)" = "$netns" ] || continue
      pid=${ns#/proc/}; pid=${pid%%/*}
      kill -9 "$pid" 2>/dev/null && left+=("$pid")
    done
  fi
  [ "${#left[@]}" -eq 0 ] && break
  sleep 0.2
done
# runc's cgroups, under each controller: containerd's CRI puts each container under k8s.io/.
for cgroup in /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/k8s.io; do
  [ -d "$cgroup" ] && find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null
done
if [ -n "${2:-}" ]; then
  "$(dirname "$0")/../target/cluster/bin/kubectl" --kubeconfig "$2" delete node localhost --ignore-not-found --timeout=30s >/dev/null 2>&1
fi
rm -rf "$node"
echo "node down: $node removed"
