#!/usr/bin/env bash
# `make e2e-cluster`: a control plane of its own (cluster/up.sh, in target/cluster/e2e), every
# cluster test against it, one at a time, then the control plane stopped, pass or fail. Bounded:
# each suite gets E2E_CLUSTER_SECONDS (default 30 minutes).
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
# One suite after another, each test alone: the webhook configuration and the nodes are
# cluster-wide. The stand-ins' own tests first, then the seed and the controller, then the webhook.
suites=(
  "-p ome-spread-sim --test cluster_seed --test cluster_racks --test cluster_status --test cluster_migration --test cluster_migration_deadline --test cluster_restart"
  "-p ome-spread-controller --test seed --test cluster --test deployed"
  "-p ome-spread --test webhook"
)
for suite in "${suites[@]}"; do
  # shellcheck disable=SC2086 # each suite is cargo's arguments
  timeout "${E2E_CLUSTER_SECONDS:-1800}" cargo test $suite -- --ignored --test-threads 1 "$@"
done
echo "time: the cluster tests took $((SECONDS - start)) s"
