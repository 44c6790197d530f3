#!/usr/bin/env bash
# A Kubernetes control plane for the tests and for trying OME's how-to: etcd, kube-apiserver,
# kube-controller-manager (namespaces, garbage collection, service accounts only) and
# kube-scheduler, built by `make cluster-bin`, on 127.0.0.1 and free ports. No kubelet: kwok
# (cluster/kwok-up.sh) plays the nodes. Certificates and keys are made for the run. Leaves everything running and prints the admin KUBECONFIG; `cluster/down.sh` stops it.
#
#   cluster/up.sh [RUN_DIR]      (default target/cluster/run)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/target/cluster/bin
run=$(realpath -m "${1:-target/cluster/run}")
# Bounded: each component gets this long to become ready.
ready_seconds=${CLUSTER_READY_SECONDS:-90}

if [ -f "$run/pids" ] && kill -0 $(awk 'NR == 1 { print $2 }' "$run/pids") 2>/dev/null; then
  echo "a cluster already runs from $run: cluster/down.sh $run stops it" >&2
  exit 1
fi
for component in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [ -x "$bin/$component" ] || { echo "$bin/$component not built: run make cluster-bin" >&2; exit 1; }
done
rm -rf "$run"
mkdir -p "$run/pki" "$run/logs" "$run/args"

# Free ports on 127.0.0.1, asked of the kernel all at once so that none is handed out twice.
read -r etcd_port peer_port api_port kcm_port scheduler_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')

# The run's certificates: one CA for serving and client certificates, and the key that signs
# ServiceAccount tokens.
pki=$run/pki
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=ome-spread-test-ca" \
  -keyout "$pki/ca.key" -out "$pki/ca.crt"
# cert NAME SUBJECT [SAN]: a key and a certificate signed by the CA.
cert() {
  local name=$1 subject=$2 san=${3:-}
  openssl_quiet req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$pki/$name.key" -out "$pki/$name.csr"
  local ext=$pki/$name.ext
  if [ -n "$san" ]; then
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" > "$ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' > "$ext"
  fi
  openssl_quiet x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -extfile "$ext" -out "$pki/$name.crt"
  rm -f "$pki/$name.csr" "$ext"
}
# 10.96.0.1: the `kubernetes` Service, where pods on cluster/node-up.sh's node reach the API server.
cert apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc"
# Served by the tests' admission host, which the API server calls as a webhook.
cert webhook "/CN=ome-spread-admission" "IP:127.0.0.1,DNS:localhost"
cert admin "/O=system:masters/CN=admin"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
openssl_quiet genrsa -out "$pki/service-account.key" 2048
openssl_quiet rsa -in "$pki/service-account.key" -pubout -out "$pki/service-account.pub"

server=https://127.0.0.1:$api_port
# kubeconfig NAME: a kubeconfig for the client certificate NAME.
kubeconfig() {
  cat > "$run/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: ome-spread-test
    cluster: {server: $server, certificate-authority: $pki/ca.crt}
users:
  - name: $1
    user: {client-certificate: $pki/$1.crt, client-key: $pki/$1.key}
contexts:
  - name: $1
    context: {cluster: ome-spread-test, user: $1}
current-context: $1
EOF
}
for user in admin controller-manager scheduler; do kubeconfig "$user"; done

: > "$run/pids"
# start NAME ARGS...: runs a component in the background, its output in logs/NAME.log, its
# arguments kept in args/NAME for cluster/restart.sh.
start() {
  local name=$1; shift
  printf '%s\0' "$@" > "$run/args/$name"
  "$bin/$name" "$@" >> "$run/logs/$name.log" 2>&1 &
  echo "$name $!" >> "$run/pids"
}
# wait_for NAME COMMAND...: until COMMAND succeeds, for at most ready_seconds.
wait_for() {
  local name=$1; shift
  for _ in $(seq $((ready_seconds * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "$name not ready within ${ready_seconds}s; its log:" >&2
  tail -20 "$run/logs/$name.log" >&2
  "$PWD/cluster/down.sh" "$run" >&2
  exit 1
}

start etcd --name ome-spread-test --data-dir "$run/etcd" --unsafe-no-fsync \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "ome-spread-test=http://127.0.0.1:$peer_port" --listen-metrics-urls ""
wait_for etcd curl -sf "http://127.0.0.1:$etcd_port/health"

start kube-apiserver --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --authorization-mode RBAC \
  --requestheader-client-ca-file "$pki/ca.crt" --requestheader-allowed-names front-proxy \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/service-account.pub" \
  --service-account-signing-key-file "$pki/service-account.key" \
  --service-cluster-ip-range 10.96.0.0/16 --allow-privileged=false \
  --audit-policy-file "$PWD/cluster/audit-policy.yaml" --audit-log-path "$run/logs/audit.log" \
  --audit-log-format json --audit-log-maxsize 100
wait_for kube-apiserver curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$server/readyz"

# The client rate limits of the controller manager and the scheduler raised as kwok's kwokctl
# raises them for large clusters (its --disable-qps-limits): at their defaults (20 and 50 requests
# a second) the scheduler would take ten minutes to bind 30,000 pods of kwok's nodes, and the
# namespace controller as long to delete them. At the suites' scale they change nothing.
unlimited=(--kube-api-qps 5000 --kube-api-burst 10000)
# Only the controllers a cluster without kubelets still needs: a namespace's deletion, the
# garbage collection of what an owner leaves, the `default` ServiceAccount of each namespace. Each
# runs as its own ServiceAccount, as kubeadm has them (the bootstrap RBAC grants the controller
# manager's own user none of their rights).
start kube-controller-manager --kubeconfig "$run/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$run/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$run/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$kcm_port" --leader-elect=false \
  --use-service-account-credentials --root-ca-file "$pki/ca.crt" \
  --controllers namespace,garbagecollector,serviceaccount "${unlimited[@]}"
start kube-scheduler --kubeconfig "$run/scheduler.kubeconfig" \
  --authentication-kubeconfig "$run/scheduler.kubeconfig" \
  --authorization-kubeconfig "$run/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$scheduler_port" --leader-elect=false "${unlimited[@]}"
wait_for kube-controller-manager curl -sfk "https://127.0.0.1:$kcm_port/healthz"
wait_for kube-scheduler curl -sfk "https://127.0.0.1:$scheduler_port/readyz"
# The default ServiceAccount, which every pod needs, is there once the controller manager runs.
wait_for kube-controller-manager "$bin/kubectl" --kubeconfig "$run/admin.kubeconfig" get serviceaccount default -n default

cp "$run/admin.kubeconfig" "$run/kubeconfig"
cat > "$run/env" <<EOF
export KUBECONFIG=$run/kubeconfig
export PATH=$bin:\$PATH
EOF
echo "cluster up: kube-apiserver $server, etcd, kube-controller-manager and kube-scheduler on 127.0.0.1"
echo "export KUBECONFIG=$run/kubeconfig   # or: source $run/env (kubectl on PATH too)"
