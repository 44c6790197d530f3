#!/usr/bin/env bats
# End-to-end: the annotated policy under the real `kwctl run`, as a user runs it, on every case of
# the rule table (tests/data/cases/<case>/: request.json, settings.json, session.yml,
# response.json). The cluster's answers are replayed from the session (an empty one where the
# policy calls no host), so no case needs a cluster or the network. stdout (kwctl's
# AdmissionResponse) is read apart from stderr (kwctl's logs, such as an offline machine's
# Sigstore warning). `make e2e-tests` runs it.

bats_require_minimum_version 1.5.0

setup() {
  for tool in kwctl jq; do
    command -v "$tool" >/dev/null || skip "$tool not installed"
  done
}

# kwctl run on one case: $output is kwctl's AdmissionResponse, $stderr its logs.
run_case() {
  local dir="tests/data/cases/$1"
  run --separate-stderr kwctl run --allow-context-aware \
    --replay-host-capabilities-interactions "$dir/session.yml" \
    --request-path "$dir/request.json" --settings-path "$dir/settings.json" annotated-policy.wasm
}

# The response's JSONPatch (RFC 6902: add, replace, remove) applied to the case's pod.
patched_pod() {
  jq -n --argjson response "$output" --slurpfile request "$1/request.json" '
    def typed($doc; $steps):
      reduce $steps[] as $s ({p: [], d: $doc};
        if (.d | type) == "array"
        then (if $s == "-" then (.d | length) else ($s | tonumber) end) as $i | .p += [$i] | .d = .d[$i]
        else .p += [$s] | .d = .d[$s] end) | .p;
    ($response.patch // "" | if . == "" then [] else @base64d | fromjson end) as $ops
    | reduce $ops[] as $op ($request[0].request.object;
        . as $doc
        | ($op.path | if . == "" then [] else ltrimstr("/") | split("/") | map(gsub("~1"; "/") | gsub("~0"; "~")) end) as $steps
        | typed($doc; $steps) as $p
        | if $op.op == "add" and ($p | length) > 0 and (getpath($p[:-1]) | type) == "array"
          then setpath($p[:-1]; getpath($p[:-1]) | .[:$p[-1]] + [$op.value] + .[$p[-1]:])
          elif $op.op == "add" or $op.op == "replace" then setpath($p; $op.value)
          elif $op.op == "remove" then delpaths([$p])
          else error("unsupported patch op \($op.op)") end)'
}

# Compares one case's answer with response.json; prints what differs.
check_case() {
  local name=$1 dir="tests/data/cases/$1" expected="tests/data/cases/$1/response.json"
  for file in request.json settings.json session.yml response.json; do
    [ -f "$dir/$file" ] || { echo "$name: no $file"; return; }
  done
  run_case "$name"
  if jq -e '.message // "" | startswith("invalid policy settings: ")' "$expected" >/dev/null; then
    local reason
    reason=$(jq -r '.message | ltrimstr("invalid policy settings: ")' "$expected")
    [ "$status" -ne 0 ] || echo "$name: kwctl accepted invalid settings"
    [[ "$stderr" == *"Provided settings are not valid: $reason"* ]] || echo "$name: settings error differs"
    return
  fi
  [ "$status" -eq 0 ] || { echo "$name: kwctl exited $status: ${stderr##*$'\n'}"; return; }
  [ "$(jq -r '.allowed' <<<"$output")" = "$(jq -r '.accepted' "$expected")" ] || echo "$name: allowed differs"
  [ "$(jq -c '.status.message // null' <<<"$output")" = "$(jq -c '.message // null' "$expected")" ] ||
    echo "$name: message differs: $(jq -c '.status.message' <<<"$output")"
  [ "$(jq -c '.warnings // []' <<<"$output")" = "$(jq -c '.warnings // []' "$expected")" ] ||
    echo "$name: warnings differ: $(jq -c '.warnings' <<<"$output")"
  local want
  want=$(jq -c -S '.mutated_object // null' "$expected")
  if [ "$want" = null ]; then
    [ "$(jq -r '.patch // ""' <<<"$output")" = "" ] || echo "$name: unexpected patch"
  else
    [ "$(patched_pod "$dir" | jq -c -S .)" = "$want" ] || echo "$name: the patched pod differs from mutated_object"
  fi
}

@test "seed: both Instances get the Required zone constraint (P5)" {
  for instance in 0 1; do
    name=p5_seed_instance_${instance}_gets_the_required_zone_constraint
    run_case "$name"
    [ "$status" -eq 0 ]
    [ "$(jq -r '.allowed' <<<"$output")" = "true" ]
    [ "$(patched_pod "tests/data/cases/$name" | jq -c '.spec.topologySpreadConstraints | map([.topologyKey, .whenUnsatisfiable])')" = \
      '[["topology.kubernetes.io/zone","DoNotSchedule"]]' ]
  done
}

@test "multi-node: the worker gets its leader's rack affinity and no constraint (P8, P10)" {
  run_case p8_worker_gets_the_leader_affinity_and_keeps_its_other_affinity
  [ "$status" -eq 0 ]
  [ "$(jq -r '.patch' <<<"$output" | base64 -d | jq -c '[.[].path]')" = \
    '["/spec/affinity/podAffinity"]' ]
}

@test "a missing replica is rejected with the host's reason on one line (P3)" {
  RUST_BACKTRACE=1 run_case p3_missing_replica_is_rejected_with_the_host_reason
  [ "$status" -eq 0 ]
  [ "$(jq -r '.status.message' <<<"$output")" = "cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: Cannot find ome.io/v1beta1/InferenceReplica named 'qwen3-0-6b-engine' inside of namespace 'Some(\"spread-demo\")'" ]
}

@test "every case: allowed, patched and rejected exactly as response.json says" {
  local failures=() checked=0 dirs=(tests/data/cases/*/)
  [ -d "${dirs[0]}" ] || { echo "no cases under tests/data/cases"; return 1; }
  for dir in "${dirs[@]}"; do
    name=$(basename "$dir")
    while IFS= read -r failure; do
      [ -z "$failure" ] || failures+=("$failure")
    done < <(check_case "$name")
    checked=$((checked + 1))
  done
  printf '%s\n' "${failures[@]}"
  echo "checked $checked of ${#dirs[@]} cases under kwctl"
  # For CI's closing count (bats passes fd 3 through to its output).
  echo "# kwctl cases: $((checked - ${#failures[@]})) passed; ${#failures[@]} failed" >&3
  [ "$checked" -eq "${#dirs[@]}" ]
  [ "${#failures[@]}" -eq 0 ]
}
