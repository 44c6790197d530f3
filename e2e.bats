#!/usr/bin/env bats
# End-to-end: the annotated policy under `kwctl run`, as a user runs it, on every case of the rule
# table (tests/data/cases/<case>/: request.json, settings.json, session.yml, response.json), with
# the cluster's answers replayed from the session. `make e2e-tests` runs it where kwctl, bats and
# jq exist.

setup() {
  command -v kwctl >/dev/null || skip "kwctl not found"
  command -v jq >/dev/null || skip "jq not found"
}

# kwctl run on one case; prints kwctl's AdmissionResponse.
run_case() {
  local dir="tests/data/cases/$1" replay=()
  [ -f "$dir/session.yml" ] && replay=(--replay-host-capabilities-interactions "$dir/session.yml")
  run kwctl run --allow-context-aware --request-path "$dir/request.json" \
    --settings-path "$dir/settings.json" "${replay[@]}" annotated-policy.wasm
}

# The JSONPatch operations on paths under $1, decoded from the response.
patch_at() {
  echo "$output" | jq -r '.patch // empty' | base64 -d | jq -c --arg path "$1" '.[] | select(.path | startswith($path))'
}

@test "seed: both Instances get the Required zone constraint (P5)" {
  for instance in 0 1; do
    run_case p5_seed_instance_${instance}_gets_the_required_zone_constraint
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | jq -r '.allowed')" = "true" ]
    patch_at /spec/topologySpreadConstraints | grep -F '"topologyKey":"topology.kubernetes.io/zone"'
    patch_at /spec/topologySpreadConstraints | grep -F '"whenUnsatisfiable":"DoNotSchedule"'
  done
}

@test "multi-node: the worker gets its leader's rack affinity and no constraint (P8, P10)" {
  run_case p8_worker_gets_the_leader_affinity_and_keeps_its_other_affinity
  [ "$status" -eq 0 ]
  patch_at /spec/affinity | grep -F '"topologyKey":"nvidia.com/gpu.clique"'
  [ -z "$(patch_at /spec/topologySpreadConstraints)" ]
}

@test "every case: allowed, patched and rejected exactly as response.json says" {
  failures=()
  for dir in tests/data/cases/*/; do
    name=$(basename "$dir")
    expected="$dir/response.json"
    run_case "$name"
    if jq -e '.message // "" | startswith("invalid policy settings")' "$expected" >/dev/null; then
      [ "$status" -ne 0 ] || failures+=("$name: kwctl accepted invalid settings")
      continue
    fi
    [ "$status" -eq 0 ] || { failures+=("$name: kwctl exited $status"); continue; }
    [ "$(echo "$output" | jq -r '.allowed')" = "$(jq -r '.accepted' "$expected")" ] || failures+=("$name: allowed differs")
    if jq -e 'has("mutated_object")' "$expected" >/dev/null; then
      [ -n "$(patch_at /spec)" ] || failures+=("$name: no patch")
    else
      [ -z "$(patch_at /)" ] || failures+=("$name: unexpected patch")
    fi
    if jq -e 'has("message")' "$expected" >/dev/null; then
      [ "$(echo "$output" | jq -r '.status.message')" = "$(jq -r '.message' "$expected")" ] || failures+=("$name: message differs")
    fi
  done
  printf '%s\n' "${failures[@]}"
  [ "${#failures[@]}" -eq 0 ]
}
