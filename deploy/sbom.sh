#!/usr/bin/env bash
# `make sboms`: the CycloneDX SBOMs of a release, into DIR (make release: target/release-artifacts):
#   ome-spread-policy.cdx.json                  the policy module's crates (wasm32-wasip1)
#   ome-spread-linux-ARCH.cdx.json              the static controller's crates, per platform
#   ome-spread-controller-linux-ARCH.cdx.json   the image of that platform: the controller alone
# Each platform is given as ARCH:TARGET (amd64:x86_64-unknown-linux-musl), as the Makefile maps them.
# cargo-cyclonedx writes them from `cargo metadata`, whose resolve unifies features over the whole
# workspace: the policy's would list the kube client and tokio that the controller's features pull
# in and the policy never links. Each is cut to what `cargo tree` resolves for its package and
# target alone, as `cargo build -p` builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: deploy/sbom.sh DIR VERSION ARCH:TARGET...}
version=${2:?usage: deploy/sbom.sh DIR VERSION ARCH:TARGET...}
shift 2
name=sbom-$$
linked=$(mktemp)
trap 'find . -maxdepth 2 -name "$name.json" -delete; rm -f "$linked"' EXIT

# sbom PACKAGE FOLDER TARGET OUT: the SBOM of PACKAGE (at FOLDER) built for TARGET, into OUT.
sbom() {
  cargo cyclonedx --quiet --format json --spec-version 1.5 --no-build-deps --target "$3" --override-filename "$name"
  cargo tree --quiet --locked -p "$1" --target "$3" -e normal --prefix none --format '{p}' |
    awk '{ print $1 "@" substr($2, 2) }' | sort -u |
    jq -R -s 'split("\n")' > "$linked"
  jq --slurpfile linked "$linked" '
    ($linked[0] | map({key: ., value: true}) | from_entries) as $keep
    | .components |= map(select($keep[.name + "@" + .version]))
    | ([.metadata.component["bom-ref"]] + [.components[]["bom-ref"]]) as $refs
    | .dependencies |= map(select(.ref | IN($refs[]))
        | .dependsOn |= (. // [] | map(select(IN($refs[])))))' "$2/$name.json" > "$4"
}

sbom ome-spread . wasm32-wasip1 "$dir/ome-spread-policy.cdx.json"
for platform in "$@"; do
  arch=${platform%%:*} target=${platform#*:}
  sbom ome-spread-controller controller "$target" "$dir/ome-spread-linux-$arch.cdx.json"
  # The image holds one file, the controller: its SBOM names the image, holding that component.
  jq --arg version "$version" --arg arch "$arch" '
    .metadata.component as $controller
    | .metadata.component = {type: "container", "bom-ref": "image", name: "ome-spread-controller",
        version: $version, purl: ("pkg:oci/ome-spread-controller?tag=" + $version + "&arch=" + $arch)}
    | .components = [$controller + {components: .components}]
    | .dependencies += [{ref: "image", dependsOn: [$controller["bom-ref"]]}]
    | del(.serialNumber)' "$dir/ome-spread-linux-$arch.cdx.json" > "$dir/ome-spread-controller-linux-$arch.cdx.json"
done
