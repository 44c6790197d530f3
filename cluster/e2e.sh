#!/usr/bin/env bash
# `make e2e-cluster`: a control plane of its own (cluster/up.sh, in target/cluster/e2e), every
# cluster test against it, one at a time, then the control plane stopped, pass or fail. Bounded:
# the tests get E2E_CLUSTER_SECONDS (default 30 minutes) in all.
set -euo pipefail
cd "$(dirname "$0")/.."
run=$PWD/target/cluster/e2e
cluster/down.sh "$run" >/dev/null
start=$SECONDS
cluster/up.sh "$run"
trap 'cluster/down.sh "$run"' EXIT
echo "time: the control plane took $((SECONDS - start)) s to start"
export OME_SPREAD_E2E_KUBECONFIG=$run/kubeconfig OME_SPREAD_E2E_RUN=$run
start=$SECONDS
timeout "${E2E_CLUSTER_SECONDS:-1800}" cargo test -p ome-spread-controller --test seed --test cluster --test deployed \
  -- --ignored --test-threads 1 "$@"
echo "time: the cluster tests took $((SECONDS - start)) s"
