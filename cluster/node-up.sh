#!/usr/bin/env bash
# A real node for the control plane of cluster/up.sh: containerd (Debian's, with runc), the CNI
# bridge, host-local and loopback plugins (containernetworking-plugins) and the kubelet of
# `make node-bin`, all in a network and mount namespace of their own, so that nothing of the node
# (its bridge, its pods' addresses, its mounts) touches the host's. Between that namespace and the
# host only socat's forwards on 127.0.0.1, through Unix sockets in NODE_DIR:
#   - into the node: the API server's port (for the kubelet) and 10.96.0.1:443, the `kubernetes`
#     Service (for the pods, as kube-proxy would route it), and FORWARD_PORTS (e.g. a registry's);
#   - out of it: the kubelet's port, which the API server reaches by the node's name, `localhost`,
#     for `kubectl logs`.
# Also a second kube-controller-manager running the controllers a node needs that cluster/up.sh
# leaves out (deployments, replica sets, the kube-root-ca.crt ConfigMap of each namespace, and the
# node lifecycle, which lifts the not-ready taint the kubelet registers the node with).
# The node, `localhost`, is tainted ome-spread.io/node=real:NoSchedule and labelled
# ome-spread.io/node=real: only pods that tolerate it run there. Leaves everything running, and
# the node Ready; `cluster/node-down.sh NODE_DIR` stops it.
#
#   FORWARD_PORTS="5000" cluster/node-up.sh RUN_DIR [NODE_DIR]   (NODE_DIR default RUN_DIR/node)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/target/cluster/bin
run=$(realpath -m "$1")
node=$(realpath -m "${2:-$run/node}")
pause_archive=$PWD/target/node/pause.oci.tar
pause_image=localhost/pause:3.10.1
ready_seconds=${CLUSTER_READY_SECONDS:-120}
for need in "$bin/kubelet" "$pause_archive"; do
  [ -e "$need" ] || { echo "$need not built: run make node-bin" >&2; exit 1; }
done
for tool in containerd ctr runc socat nsenter unshare /usr/lib/cni/bridge; do
  command -v "$tool" >/dev/null || { echo "$tool not found (Debian: apt-get install containerd runc socat containernetworking-plugins)" >&2; exit 1; }
done
kubeconfig=$run/admin.kubeconfig
api_port=$(sed -n 's|.*server: https://127.0.0.1:\([0-9]*\),.*|\1|p' "$kubeconfig")
kubectl=("$bin/kubectl" --kubeconfig "$kubeconfig")

# A node an earlier run left (killed before its node-down.sh) is stopped first.
"$PWD/cluster/node-down.sh" "$node" > /dev/null
mkdir -p "$node/logs" "$node/cni" "$node/sockets" "$node/pod-logs"
: > "$node/pids"
# start NAME COMMAND...: in the background, its output in logs/NAME.log.
start() {
  local name=$1; shift
  "$@" >> "$node/logs/$name.log" 2>&1 &
  echo "$name $!" >> "$node/pids"
}
# wait_for WHAT COMMAND...: until COMMAND succeeds, for at most ready_seconds.
wait_for() {
  local what=$1; shift
  for _ in $(seq $((ready_seconds * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "$what not ready within ${ready_seconds}s; the node's logs are in $node/logs" >&2
  tail -5 "$node"/logs/*.log >&2
  "$PWD/cluster/node-down.sh" "$node" >&2
  exit 1
}
read -r kubelet_port healthz_port kcm_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')

# The CRI plugin's pod network: one bridge, its addresses from host-local, no masquerade (no
# traffic leaves the namespace). containerd adds the loopback plugin itself.
cat > "$node/cni/10-ome-spread.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "ome-spread-node", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.98.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$node/cni/ipam"}}]}
EOF
registries=""
for port in ${FORWARD_PORTS:-}; do
  registries+="[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"127.0.0.1:$port\"]
  endpoint = [\"http://127.0.0.1:$port\"]
"
done
# restrict_oom_score_adj: this machine withholds CAP_SYS_RESOURCE, and the sandbox's negative
# oom_score_adj would be refused.
cat > "$node/containerd.toml" <<EOF
version = 2
root = "$node/containerd/root"
state = "$node/containerd/state"
[grpc]
  address = "$node/containerd.sock"
[ttrpc]
  address = "$node/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$node/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  restrict_oom_score_adj = true
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "$node/cni"
$registries
EOF

# containerd holds the namespaces: /var/lib and /run empty and forgotten in them (containerd and
# the kubelet keep files there that no flag moves), the loopback up with 10.96.0.1 on it, and a
# the node's own address beside it (the kubelet refuses a loopback address, not another one on
# that interface; this kernel has no dummy interfaces).
start containerd unshare --net --mount --propagation private sh -c '
  mount -t tmpfs tmpfs /var/lib && mount -t tmpfs tmpfs /run &&
  ip link set lo up && ip addr add 10.96.0.1/32 dev lo && ip addr add 10.99.0.1/32 dev lo &&
  exec containerd --config "$1"' sh "$node/containerd.toml"
holder=$(awk '$1 == "containerd" { print $2 }' "$node/pids")
wait_for containerd test -S "$node/containerd.sock"
readlink "/proc/$holder/ns/net" > "$node/netns"
in_node=(nsenter --target "$holder" --net --mount)

# forward_in NAME LISTEN PORT: socat from LISTEN (address:port) in the node's network namespace
# to PORT on the host's 127.0.0.1, through the Unix socket sockets/NAME.
forward_in() {
  local name=$1 listen=$2 port=$3 socket=$node/sockets/$1
  start "$name-host" socat "UNIX-LISTEN:$socket,fork" "TCP:127.0.0.1:$port"
  start "$name-node" nsenter --target "$holder" --net socat "TCP-LISTEN:${listen##*:},bind=${listen%:*},fork,reuseaddr" "UNIX-CONNECT:$socket"
}
forward_in apiserver "127.0.0.1:$api_port" "$api_port"
forward_in kubernetes-service 10.96.0.1:443 "$api_port"
for port in ${FORWARD_PORTS:-}; do forward_in "port-$port" "127.0.0.1:$port" "$port"; done
start kubelet-out nsenter --target "$holder" --net socat "UNIX-LISTEN:$node/sockets/kubelet,fork" "TCP:127.0.0.1:$kubelet_port"
start kubelet-in socat "TCP-LISTEN:$kubelet_port,bind=127.0.0.1,fork,reuseaddr" "UNIX-CONNECT:$node/sockets/kubelet"

ctr=("${in_node[@]}" ctr --address "$node/containerd.sock" --namespace k8s.io)
"${ctr[@]}" images import --index-name "$pause_image" "$pause_archive" > /dev/null

# The kubelet as it ran on this machine kind: cgroup v1 allowed, no QoS cgroups or allocatable
# enforcement, eviction thresholds near zero (the disk is shared with the build). Its API on the
# node's 127.0.0.1 only, reached from the API server through the forward above, which sends no
# client certificate (cluster/up.sh gives it none): anonymous, on loopback only.
cat > "$node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
localStorageCapacityIsolation: false
containerRuntimeEndpoint: unix://$node/containerd.sock
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
podLogsDir: $node/pod-logs
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: 1Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
registerWithTaints: [{key: ome-spread.io/node, value: real, effect: NoSchedule}]
EOF
# The admin's kubeconfig, as the kubelet was tried here: cluster/up.sh makes no node certificate.
start kubelet "${in_node[@]}" "$bin/kubelet" --config "$node/kubelet.yaml" --kubeconfig "$kubeconfig" \
  --hostname-override localhost --node-ip 10.99.0.1 --node-labels ome-spread.io/node=real \
  --root-dir "$node/kubelet" --cert-dir "$node/kubelet-pki"

start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$run/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$run/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$run/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$kcm_port" --leader-elect=false \
  --use-service-account-credentials --root-ca-file "$run/pki/ca.crt" \
  --controllers deployment,replicaset,root-ca-cert-publisher,nodelifecycle
wait_for "the node" "${kubectl[@]}" wait --for=condition=Ready node/localhost --timeout=1s
echo "node up: localhost Ready (kubelet $("$bin/kubelet" --version | cut -d' ' -f2), containerd $(containerd --version | cut -d' ' -f3)); cluster/node-down.sh $node stops it"
