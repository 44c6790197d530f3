#!/usr/bin/env bash
# `make publish REGISTRY=host[:port]/path`: what `make release` wrote, pushed to REGISTRY as
# VERSION (the chart's appVersion, which make passes), signed by digest with cosign, and each SBOM
# attested to what it describes (docs/security.md):
#   REGISTRY/ome-spread:VERSION              the policy (annotated where kwctl made it)
#   REGISTRY/ome-spread-controller:VERSION   the controller's image index (amd64, arm64)
# COSIGN_KEY: a cosign key pair's private key (COSIGN_PASSWORD its password); without it cosign
# signs keyless, with the identity of the CI it runs in. PLAIN_HTTP=1: a registry without TLS.
# Prints the two references by digest.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: deploy/publish.sh REGISTRY (host[:port]/path) VERSION (the chart's appVersion)"
registry=${1:?$usage}
version=${2:?$usage}
artifacts=target/release-artifacts
cosign=${COSIGN:-target/cluster/bin/cosign}
http=() from_http=() to_http=()
[ "${PLAIN_HTTP:-}" = 1 ] && http=(--allow-http-registry) from_http=(--tls-verify=false) to_http=(--dest-tls-verify=false)
key=()
[ -n "${COSIGN_KEY:-}" ] && key=(--key "$COSIGN_KEY")

# The policy, as kwctl push writes one: cosign writes the media types policy-server pulls (config
# application/vnd.wasm.config.v1+json, layer application/vnd.wasm.content.layer.v1+wasm; Kubewarden's
# policy-fetcher, src/registry/mod.rs). Its digest is the manifest's, read back.
policy=$artifacts/annotated-policy.wasm
[ -f "$policy" ] || policy=$artifacts/policy.wasm
"$cosign" upload wasm "${http[@]}" -f "$policy" "$registry/ome-spread:$version"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
skopeo inspect --raw "${from_http[@]}" "docker://$registry/ome-spread:$version" > "$work/policy.json"
policy_ref=$registry/ome-spread@$(skopeo manifest-digest "$work/policy.json")

# The image: the index and both platforms' images, as make image wrote them.
skopeo copy --quiet --all "${to_http[@]}" --digestfile "$work/image.digest" \
  "oci-archive:$artifacts/ome-spread-controller.oci.tar" "docker://$registry/ome-spread-controller:$version"
image_ref=$registry/ome-spread-controller@$(cat "$work/image.digest")

# Each signed twice: in the Sigstore bundle cosign 3 writes by default, and in the tag-based format
# of cosign 2 (`sha256-DIGEST.sig`), the one policy-server's verification and most admission
# controllers read (Kubewarden signs its own releases both ways: kubewarden/policy-server#1314).
# With a key no transparency log is written: a signing config without one.
signing_config=()
if [ -n "${COSIGN_KEY:-}" ]; then
  "$cosign" signing-config create --out "$work/signing-config.json"
  signing_config=(--signing-config "$work/signing-config.json")
fi
sign() {
  "$cosign" sign --yes "${http[@]}" "${key[@]}" "${signing_config[@]}" "$1"
  "$cosign" sign --yes "${http[@]}" "${key[@]}" --new-bundle-format=false --use-signing-config=false \
    ${COSIGN_KEY:+--tlog-upload=false} "$1"
}
sign "$policy_ref"
sign "$image_ref"
# The SBOMs, as CycloneDX attestations: the policy's on the policy, each platform's image SBOM on
# that platform's image in the index.
attest() {
  "$cosign" attest --yes "${http[@]}" "${key[@]}" "${signing_config[@]}" --type cyclonedx --predicate "$2" "$1"
}
attest "$policy_ref" "$artifacts/ome-spread-policy.cdx.json"
skopeo inspect --raw "${from_http[@]}" "docker://$image_ref" |
  jq -r '.manifests[] | "\(.platform.architecture) \(.digest)"' > "$work/platforms"
while read -r arch digest; do
  attest "$registry/ome-spread-controller@$digest" "$artifacts/ome-spread-controller-linux-$arch.cdx.json"
done < "$work/platforms"
echo "policy: $policy_ref"
echo "image: $image_ref"
