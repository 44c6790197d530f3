#!/usr/bin/env bats
# End-to-end: the annotated policy run by kwctl, as a user runs it, with the cluster's answers
# replayed from tests/data/sessions. `make e2e-tests` runs it where kwctl, bats and jq exist.

setup() {
  command -v kwctl >/dev/null || skip "kwctl not found"
  command -v jq >/dev/null || skip "jq not found"
}

# kwctl run with a replayed session; prints kwctl's AdmissionResponse.
run_policy() {
  local request=$1 session=$2
  run kwctl run --allow-context-aware \
    --request-path "tests/data/requests/$request.json" \
    --replay-host-capabilities-interactions "tests/data/sessions/$session.yml" \
    annotated-policy.wasm
}

# The JSONPatch operation that adds to `path`, decoded from the response.
patch_at() {
  echo "$output" | jq -r '.patch' | base64 -d | jq -c --arg path "$1" '.[] | select(.path | startswith($path))'
}

@test "seed: Instance 0 gets the Required zone constraint (P5)" {
  run_policy qwen3-0-6b-engine-0-default-0 qwen3-0-6b-engine
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | jq -r '.allowed')" = "true" ]
  patch=$(patch_at /spec/topologySpreadConstraints)
  [ "$(echo "$patch" | jq -r '.value[0].topologyKey // .value.topologyKey')" = "topology.kubernetes.io/zone" ]
  [ "$(echo "$patch" | jq -r '.value[0].whenUnsatisfiable // .value.whenUnsatisfiable')" = "DoNotSchedule" ]
}

@test "seed: Instance 1 gets the same constraint (P5)" {
  run_policy qwen3-0-6b-engine-1-default-0 qwen3-0-6b-engine
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | jq -r '.allowed')" = "true" ]
  [ -n "$(patch_at /spec/topologySpreadConstraints)" ]
}

@test "Preferred gets ScheduleAnyway (P5)" {
  run_policy qwen3-8b-engine-0-default-0 qwen3-8b-engine
  [ "$status" -eq 0 ]
  patch=$(patch_at /spec/topologySpreadConstraints)
  [ "$(echo "$patch" | jq -r '.value[0].whenUnsatisfiable // .value.whenUnsatisfiable')" = "ScheduleAnyway" ]
}

@test "multi-node: the leader gets the zone constraint (P5)" {
  run_policy deepseek-v3-engine-0-leader-0 deepseek-v3-engine
  [ "$status" -eq 0 ]
  [ -n "$(patch_at /spec/topologySpreadConstraints)" ]
}

@test "multi-node: the worker gets its leader's rack affinity and no constraint (P8, P10)" {
  run_policy deepseek-v3-engine-0-worker-1 deepseek-v3-engine
  [ "$status" -eq 0 ]
  patch=$(patch_at /spec/affinity/podAffinity)
  [ "$(echo "$patch" | jq -r '.. | objects | select(has("topologyKey")) | .topologyKey' | head -n1)" = "nvidia.com/gpu.clique" ]
  [ -z "$(patch_at /spec/topologySpreadConstraints)" ]
}

@test "a missing replica is rejected, naming it (P3)" {
  run_policy qwen3-0-6b-engine-0-default-0 missing-replica
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | jq -r '.allowed')" = "false" ]
  echo "$output" | jq -r '.status.message' | grep -F "cannot read InferenceReplica spread-demo/qwen3-0-6b-engine"
}
