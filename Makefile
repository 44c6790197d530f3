# ome-spread: the Kubewarden targets a policy author expects.
CARGO ?= cargo
WASM_TARGET := wasm32-wasip1
# A target dir of its own, shared with the tests, which build the wasm the same way.
BUILT_WASM := target/wasm/$(WASM_TARGET)/release/ome_spread.wasm
SOURCES := $(shell find src core/src -name '*.rs') Cargo.toml core/Cargo.toml Cargo.lock

.PHONY: release release-cli sboms cyclonedx-tool publish release-test wasm-target zig-tools controller-musl image image-test pause-image node-bin web-tools web playground test e2e-tests e2e-server demo bench bench-churn bench-churn-large bench-cluster fuzz fmt lint clean cluster-bin kwok-bin manifests cluster-up kwok-up cluster-down e2e-cluster

policy.wasm: $(SOURCES) | wasm-target
	$(CARGO) build --release --lib --target $(WASM_TARGET) --target-dir target/wasm
	cp $(BUILT_WASM) policy.wasm
	@echo "policy.wasm: $$(wc -c < policy.wasm) bytes"

# The usage text kwctl embeds (kwctl inspect, Artifact Hub) is docs/usage.md, short and the
# policy's own: the README is the project's quick start.
annotated-policy.wasm: policy.wasm metadata.yml docs/usage.md
	@command -v kwctl >/dev/null || { echo "kwctl not found: install it from $(KWCTL_RELEASES)"; exit 1; }
	kwctl annotate --metadata-path metadata.yml --usage-path docs/usage.md --output-path annotated-policy.wasm policy.wasm

# What a release publishes, in RELEASE_DIR, for linux/amd64 and linux/arm64 (ARCHES): the policy
# (annotated where kwctl is installed, and the plain module it was made from); the static controller
# (`ome-spread-linux-ARCH`) and the kubectl plugin's archive of each, with their krew manifest; the
# controller's image as one OCI image index of both; a CycloneDX SBOM of each (SBOMS); and the
# SHA256SUMS of them all. `make publish` pushes, signs and attests them (deploy/publish.sh). Without
# kwctl the annotated policy is left out, and one line says so.
RELEASE_DIR := target/release-artifacts
release: policy.wasm $(addprefix controller-musl-,$(ARCHES)) cyclonedx-tool
	@rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR) && cp policy.wasm $(RELEASE_DIR)/
	@if command -v kwctl >/dev/null; then \
		$(MAKE) --no-print-directory annotated-policy.wasm && cp annotated-policy.wasm $(RELEASE_DIR)/; \
	else \
		echo "kwctl not found: $(RELEASE_DIR) has policy.wasm but no annotated-policy.wasm (kwctl: $(KWCTL_RELEASES))"; \
	fi
	@$(MAKE) --no-print-directory image IMAGE_ARCHES="$(ARCHES)" && cp $(IMAGE_ARCHIVE) $(RELEASE_DIR)/
	@$(MAKE) --no-print-directory release-cli sboms
	@cd $(RELEASE_DIR) && sha256sum $$(ls | grep -v SHA256SUMS) > SHA256SUMS && cat SHA256SUMS

# The static binary twice per platform: as `ome-spread-linux-ARCH`, and as the kubectl plugin
# `kubectl-ome_spread` (run as `kubectl ome-spread`) in the archive its krew manifest
# (charts/krew/ome-spread.yaml, filled in with the version and each archive's checksum) names.
release-cli:
	@rm -rf $(RELEASE_DIR)/plugin && sed 's/VERSION/$(POLICY_VERSION)/g' charts/krew/ome-spread.yaml > $(RELEASE_DIR)/ome-spread.krew.yaml
	@$(foreach arch,$(ARCHES),\
		cp $(call musl_controller,$(arch)) $(RELEASE_DIR)/ome-spread-linux-$(arch) && \
		mkdir -p $(RELEASE_DIR)/plugin && cp LICENSE $(RELEASE_DIR)/plugin/ && \
		cp $(call musl_controller,$(arch)) $(RELEASE_DIR)/plugin/kubectl-ome_spread && \
		tar -C $(RELEASE_DIR)/plugin -czf $(RELEASE_DIR)/kubectl-ome_spread-linux-$(arch).tar.gz kubectl-ome_spread LICENSE && \
		rm -rf $(RELEASE_DIR)/plugin && \
		sed -i "s/SHA256_$(arch)/$$(sha256sum $(RELEASE_DIR)/kubectl-ome_spread-linux-$(arch).tar.gz | cut -d' ' -f1)/" $(RELEASE_DIR)/ome-spread.krew.yaml &&) true

# The SBOMs (deploy/sbom.sh), by cargo-cyclonedx at the version pinned here.
CARGO_CYCLONEDX_VERSION := 0.5.9
cyclonedx-tool:
	@[ "$$($(CARGO) cyclonedx --version 2>/dev/null)" = "cargo-cyclonedx $(CARGO_CYCLONEDX_VERSION)" ] || \
		$(TOOL_PROFILE) $(CARGO) install --locked --quiet cargo-cyclonedx --version $(CARGO_CYCLONEDX_VERSION)

sboms: cyclonedx-tool
	deploy/sbom.sh $(RELEASE_DIR) $(APP_VERSION) $(foreach arch,$(ARCHES),$(arch):$(call musl_target,$(arch)))

# What make release wrote, pushed to REGISTRY (host[:port]/path), signed by digest and its SBOMs
# attested, with cosign (deploy/publish.sh; docs/security.md). COSIGN_KEY: a key pair's private
# key; without it cosign signs keyless, with the identity of the CI it runs in.
publish: $(CLUSTER_BIN)/cosign
	@[ -n "$(REGISTRY)" ] || { echo "REGISTRY is required: make publish REGISTRY=registry.example.com/platform"; exit 1; }
	@command -v skopeo >/dev/null || { echo "skopeo not found: it pushes the image index (Debian: apt-get install skopeo)"; exit 1; }
	COSIGN=$(CLUSTER_BIN)/cosign deploy/publish.sh $(REGISTRY) $(APP_VERSION)

# make release, then controller/tests/release.rs on what it wrote: both platforms (the arm64
# controller run under Debian's qemu-user-static), the SBOMs, and make publish to a registry on
# 127.0.0.1 with cosign's verification. Where a tool it needs is not installed one line says which;
# CI=true makes that a failure.
RELEASE_TEST_TOOLS := buildah skopeo docker-registry qemu-aarch64-static
release-test:
	@missing="$(call missing,$(RELEASE_TEST_TOOLS))"; \
	if [ -z "$$missing" ]; then \
		$(MAKE) --no-print-directory release $(CLUSTER_BIN)/cosign && \
		$(CARGO) test --workspace --test release -- --ignored; \
	else \
		echo "the release test is skipped: it needs $$missing (Debian: apt-get install buildah skopeo docker-registry qemu-user-static)"; [ "$$CI" != true ]; \
	fi

# Artifact Hub's package file: `kwctl scaffold artifacthub` on metadata.yml and questions-ui.yml
# (Rancher's settings form, the annotation kubewarden/questions-ui), with four edits
# (ARTIFACTHUB_EDIT): a header that says so; createdAt, the release's date, kept from the committed
# file while the version is the same (kwctl stamps the current time; CREATED_AT=... sets it); no
# `policy` link, the GitHub release download kwctl derives from the source URL, since the project
# publishes no such download; and install notes of our own, saying that nothing is published at
# the metadata's ociUrl yet and pointing at policy.yaml, because the `kwctl scaffold manifest` of
# kwctl's notes leaves contextAwareResources empty and grants no read of InferenceReplicas: every
# OMENative pod would be rejected.
POLICY_VERSION = $(shell sed -n 's/^ *io\.kubewarden\.policy\.version: *//p' metadata.yml)
POLICY_OCI_URL = $(shell sed -n 's/^ *io\.kubewarden\.policy\.ociUrl: *//p' metadata.yml)

define ARTIFACTHUB_HEADER
# Artifact Hub package of the ome-spread policy, generated from metadata.yml by
# `make artifacthub-pkg.yml` (kwctl scaffold artifacthub): edit metadata.yml, not this file.
endef

define ARTIFACTHUB_INSTALL
install: |
  A release of ome-spread pushes the policy to `$(POLICY_OCI_URL)`; nothing is published there
  yet. Build the policy and push it to your registry (`make release`, then `kwctl push`: the
  README's Install). Then apply `policy.yaml` from the source repository, its `spec.module` set
  to what you pushed (`registry://YOUR_REGISTRY/ome-spread:v$(POLICY_VERSION)`): the
  ClusterAdmissionPolicy (only pods labelled `ome.io/managed-by: OMENative` reach the
  policy-server) and the RBAC that lets the policy-server read InferenceReplicas. Without that
  RBAC every OMENative pod is rejected; `kwctl scaffold manifest` does not write it.
endef

define ARTIFACTHUB_EDIT
NR == 1 { print ENVIRON["ARTIFACTHUB_HEADER"] }
/^#/ && !body { next }
{ body = 1 }
/^createdAt: / && ENVIRON["CREATED"] != "" { print "createdAt: " ENVIRON["CREATED"]; next }
skip && /^[^ ]/ { skip = 0 }
/^[^ -]/ { links = /^links:/ }
links && /^- name: policy$$/ { getline; next }
/^install: / { print ENVIRON["ARTIFACTHUB_INSTALL"]; skip = 1; found = 1; next }
!skip { print }
END { if (!found) { print "kwctl's install notes changed: update ARTIFACTHUB_EDIT in the Makefile" > "/dev/stderr"; exit 1 } }
endef
export ARTIFACTHUB_HEADER ARTIFACTHUB_INSTALL ARTIFACTHUB_EDIT

artifacthub-pkg.yml: metadata.yml questions-ui.yml
	@command -v kwctl >/dev/null || { echo "kwctl not found: install it from $(KWCTL_RELEASES)"; exit 1; }
	@CREATED="$(CREATED_AT)"; \
	if [ -z "$$CREATED" ] && [ -f $@ ] && grep -qx 'version: $(POLICY_VERSION)' $@; then \
		CREATED=$$(sed -n 's/^createdAt: //p' $@); \
	fi; \
	export CREATED; tmp=$$(mktemp); \
	kwctl scaffold artifacthub --metadata-path metadata.yml --questions-path questions-ui.yml > $$tmp && awk "$$ARTIFACTHUB_EDIT" $$tmp > $$tmp.edited \
		&& mv $$tmp.edited $@; status=$$?; rm -f $$tmp $$tmp.edited; exit $$status
	@echo "artifacthub-pkg.yml: version $(POLICY_VERSION), createdAt $$(sed -n 's/^createdAt: //p' $@)"

# A fresh machine may lack the target.
wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

# The platforms a release ships, as Kubewarden's, Kyverno's and cert-manager's images do: the
# NVLink racks the spread is for (GB200, GH200) are arm64 Grace nodes. The controller is built
# static for musl, the whole content of its image, by cargo-zigbuild: zig is the C compiler and
# linker of its C dependencies (jemalloc, ring) for either target, so one machine builds both.
# zig-tools installs both tools at the versions pinned here (ziglang from PyPI).
ARCHES := amd64 arm64
HOST_ARCH := $(if $(filter aarch64 arm64,$(shell uname -m)),arm64,amd64)
musl_target = $(if $(filter arm64,$(1)),aarch64,x86_64)-unknown-linux-musl
musl_controller = target/$(call musl_target,$(1))/release/ome-spread
ZIGLANG_VERSION := 0.17.1
CARGO_ZIGBUILD_VERSION := 0.24.1

zig-tools:
	@python3 -m ziglang version >/dev/null 2>&1 || python3 -m pip install --quiet ziglang==$(ZIGLANG_VERSION)
	@[ "$$($(CARGO) zigbuild --version 2>/dev/null)" = "cargo-zigbuild $(CARGO_ZIGBUILD_VERSION)" ] || \
		$(TOOL_PROFILE) $(CARGO) install --locked --quiet cargo-zigbuild --version $(CARGO_ZIGBUILD_VERSION)

# controller-musl-amd64, controller-musl-arm64; controller-musl: the machine's own.
controller-musl-%: zig-tools
	@rustup target list --installed | grep -qx $(call musl_target,$*) || rustup target add $(call musl_target,$*)
	@start=$$(date +%s); \
	$(CARGO) zigbuild --release --locked --quiet --target $(call musl_target,$*) -p ome-spread-controller --bin ome-spread && \
	echo "controller-musl-$*: built in $$(( $$(date +%s) - start )) s, $(call musl_controller,$*) of $$(wc -c < $(call musl_controller,$*)) bytes"

controller-musl: controller-musl-$(HOST_ARCH)

# The controller's image (deploy/Dockerfile, FROM scratch) for each of IMAGE_ARCHES (the machine's
# own; make release: both), as one OCI image index, the OCI archive IMAGE_ARCHIVE. Each platform
# is built from a context holding that platform's static controller alone, and the Dockerfile has
# no RUN: nothing of another architecture runs. Its version label is the chart's appVersion.
# buildah (chroot isolation, vfs storage under target/image, removed once the archive is written),
# as root, also keeps a cache in /var/lib/containers and a folder in /run/containers that no flag
# moves: it runs in a mount namespace of its own where /var/lib and /run are empty and forgotten,
# so that nothing of the build is left outside target/.
IMAGE_ARCHES ?= $(HOST_ARCH)
IMAGE_DIR := target/image
IMAGE_ARCHIVE := $(IMAGE_DIR)/ome-spread-controller.oci.tar
APP_VERSION = $(shell sed -n 's/^appVersion: *"\(.*\)"/\1/p' charts/ome-spread/Chart.yaml)
IMAGE_NAME = ome-spread-controller:$(APP_VERSION)
BUILDAH = TMPDIR=$(CURDIR)/$(IMAGE_DIR)/tmp unshare --mount --propagation private \
	sh -c 'mount -t tmpfs tmpfs /var/lib && mount -t tmpfs tmpfs /run && exec "$$@"' sh \
	buildah --root $(CURDIR)/$(IMAGE_DIR)/storage --runroot $(CURDIR)/$(IMAGE_DIR)/run --storage-driver vfs

PAUSE_BUILDAH = $(subst $(IMAGE_DIR),$(PAUSE_DIR),$(BUILDAH))

image: $(addprefix controller-musl-,$(IMAGE_ARCHES))
	@command -v buildah >/dev/null || { echo "buildah not found: the image is built with it (Debian: apt-get install buildah)"; exit 1; }
	@rm -rf $(IMAGE_DIR) && mkdir -p $(IMAGE_DIR)/tmp
	@start=$$(date +%s); \
	$(BUILDAH) manifest create $(IMAGE_NAME) >/dev/null && \
	$(foreach arch,$(IMAGE_ARCHES),mkdir -p $(IMAGE_DIR)/context-$(arch) && cp $(call musl_controller,$(arch)) $(IMAGE_DIR)/context-$(arch)/ && \
		$(BUILDAH) bud --quiet --isolation chroot --identity-label=false --platform linux/$(arch) --manifest $(IMAGE_NAME) \
			--build-arg VERSION=$(APP_VERSION) -f deploy/Dockerfile $(IMAGE_DIR)/context-$(arch) >/dev/null &&) \
	$(BUILDAH) manifest push --all --quiet $(IMAGE_NAME) oci-archive:$(IMAGE_ARCHIVE):$(IMAGE_NAME); \
	status=$$?; rm -rf $(IMAGE_DIR)/storage $(IMAGE_DIR)/run $(IMAGE_DIR)/tmp; [ $$status -eq 0 ] && \
	echo "image: $(IMAGE_NAME) for $(IMAGE_ARCHES) built in $$(( $$(date +%s) - start )) s, $(IMAGE_ARCHIVE) of $$(wc -c < $(IMAGE_ARCHIVE)) bytes"

# controller/tests/image.rs on the archive `make image` writes: the image itself, then through a
# registry to containerd. Where a tool it needs is not installed one line says which; CI=true
# (which installs them) makes that a failure.
IMAGE_TEST_TOOLS := buildah docker-registry containerd ctr runc
image-test:
	@missing="$(call missing,$(IMAGE_TEST_TOOLS))"; \
	if [ -z "$$missing" ]; then \
		$(MAKE) --no-print-directory image && \
		$(CARGO) test --workspace --test image -- --ignored; \
	else \
		echo "the image test is skipped: it needs $$missing (Debian: apt-get install buildah docker-registry containerd runc)"; [ "$$CI" != true ]; \
	fi

# The playground (web/): the core and the policy for wasm32-unknown-unknown, through wasm-bindgen,
# with the page, in WEB_DIR. wasm-bindgen-cli must be the version of the wasm-bindgen crate in
# Cargo.lock (the generated glue and the module must agree), so it is checked and installed.
WEB_TARGET := wasm32-unknown-unknown
# Not target/web: that is where cargo puts the `web` profile's own build files.
WEB_DIR := target/playground
WEB_WASM := target/$(WEB_TARGET)/web/ome_spread_web.wasm
WASM_BINDGEN_VERSION := $(shell awk '$$0 == "name = \"wasm-bindgen\"" { getline; gsub(/[^0-9.]/, ""); print }' Cargo.lock)
PORT ?= 8000
# Older wasm-opt (Debian 12's is 108) breaks the table of JavaScript values wasm-bindgen sets up:
# the page then fails to load ("WebAssembly.Table.set(): Argument 1 is invalid").
WASM_OPT_SINCE := 117

# A tool, built for a quick build rather than its last percent of speed: a tool's own release
# profile (fat LTO, one codegen unit) is most of a fresh CI's time spent on it.
TOOL_PROFILE := CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_OPT_LEVEL=1

web-tools:
	@rustup target list --installed | grep -qx $(WEB_TARGET) || rustup target add $(WEB_TARGET)
	@if [ "$$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $(WASM_BINDGEN_VERSION)" ]; then \
		echo "installing wasm-bindgen-cli $(WASM_BINDGEN_VERSION), the version of the wasm-bindgen crate in Cargo.lock"; \
		$(TOOL_PROFILE) $(CARGO) install --locked wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION) || { \
			echo "wasm-bindgen-cli's own Cargo.lock names a crate this registry lacks: installing it without --locked"; \
			$(TOOL_PROFILE) $(CARGO) install wasm-bindgen-cli --version =$(WASM_BINDGEN_VERSION); }; \
	fi

web: web-tools
	$(CARGO) build --profile web --lib --target $(WEB_TARGET) --package ome-spread-web
	wasm-bindgen --target web --no-typescript --out-dir $(WEB_DIR) $(WEB_WASM)
	@if [ "$$(wasm-opt --version 2>/dev/null | awk '{ print $$3 }')" -ge $(WASM_OPT_SINCE) ] 2>/dev/null; then \
		wasm-opt -Oz -o $(WEB_DIR)/ome_spread_web_bg.wasm $(WEB_DIR)/ome_spread_web_bg.wasm; \
	else echo "wasm-opt $(WASM_OPT_SINCE) or later not found: the module is left as wasm-bindgen wrote it"; fi
	cp web/index.html web/app.js web/style.css $(WEB_DIR)/
	@echo "$(WEB_DIR): the page, and ome_spread_web_bg.wasm of $$(wc -c < $(WEB_DIR)/ome_spread_web_bg.wasm) bytes"

playground: web
	@echo "The playground: http://127.0.0.1:$(PORT)/ (Ctrl-C stops it)"
	python3 -m http.server $(PORT) --bind 127.0.0.1 --directory $(WEB_DIR)

# Everything: the workspace's tests (the page in headless Chromium among them, on the built
# playground), then the playground's tests again compiled to wasm, in Node, then the controller's
# image built and checked. Without Node.js or buildah a user's machine skips that part, saying so;
# CI=true makes it a failure.
test: wasm-target web
	$(CARGO) test --workspace
	@if command -v node >/dev/null; then \
		CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
			$(CARGO) test --package ome-spread-web --target $(WEB_TARGET) --test answers --test errors; \
	else \
		echo "the playground's tests in Node not run: they need Node.js (https://nodejs.org)"; [ "$$CI" != true ]; \
	fi
	$(MAKE) --no-print-directory image-test

# The real Kubewarden runtime, kwctl and policy-server, is on no registry these suites can install
# it from: a suite that needs it runs where it is on PATH and otherwise prints one line saying what
# it skipped and why, and exits 0, under CI=true too. The line starts as the suite's own count does,
# so that CI's closing count shows the skip and never counts it as a pass.
KWCTL_RELEASES := https://github.com/kubewarden/adm-controller/releases
POLICY_SERVER_RELEASES := https://github.com/kubewarden/adm-controller/releases
# The tools of $(1) that are not on PATH, comma-separated.
missing = $$(for tool in $(1); do command -v $$tool >/dev/null || printf '%s\n' $$tool; done | paste -sd, - | sed 's/,/, /g')

# Every case of the rule table under the real `kwctl run`, and the Artifact Hub file against
# `kwctl scaffold artifacthub`.
e2e-tests:
	@missing="$(call missing,kwctl bats jq)"; \
	if [ -n "$$missing" ]; then \
		echo "# kwctl cases: skipped, $$missing not installed (kwctl: $(KWCTL_RELEASES))"; \
	else \
		$(MAKE) annotated-policy.wasm && bats e2e.bats && \
		$(CARGO) test --test manifests -- --ignored artifacthub; \
	fi

# policy-server v1.31 with the annotated policy, its Kubernetes client on a fake API server.
# POLICY_SERVER names another binary.
NEED_KUBEWARDEN = missing="$(call missing,kwctl $(if $(POLICY_SERVER),,policy-server))"

# Every case of the rule table as an AdmissionReview over HTTP to /validate/<case>.
e2e-server:
	@$(NEED_KUBEWARDEN); \
	if [ -n "$$missing" ]; then \
		echo "policy-server cases: skipped, $$missing not installed ($(KWCTL_RELEASES), $(POLICY_SERVER_RELEASES))"; \
	else \
		$(MAKE) annotated-policy.wasm && \
		$(CARGO) test --workspace --test policy_server -- --ignored --nocapture; \
	fi

# The Kubernetes components of the cluster tests (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl), built from their Go modules at the versions cluster/go.mod and go.sum
# pin. Built once: the binaries and Go's build cache stay under target/cluster.
CLUSTER_BIN := target/cluster/bin
K8S_VERSION = $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2 }' cluster/go.mod)
K8S_LDFLAGS = -s -w $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(pkg).gitVersion=$(K8S_VERSION) -X $(pkg).gitMajor=1 \
	-X $(pkg).gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) -X $(pkg).gitTreeState=clean)
GO_BUILD = CGO_ENABLED=0 GOFLAGS=-mod=readonly GOCACHE=$(CURDIR)/target/cluster/go-build \
	go -C cluster build -trimpath -ldflags '$(K8S_LDFLAGS)'

$(CLUSTER_BIN)/.built: cluster/go.mod cluster/go.sum
	@start=$$(date +%s); \
	$(GO_BUILD) -o $(CURDIR)/$(CLUSTER_BIN)/ $(foreach cmd,kube-apiserver kube-controller-manager kube-scheduler kubectl,k8s.io/kubernetes/cmd/$(cmd)) && \
	$(GO_BUILD) -o $(CURDIR)/$(CLUSTER_BIN)/etcd go.etcd.io/etcd/server/v3 && \
	echo "cluster-bin: built $(K8S_VERSION) and etcd in $$(( $$(date +%s) - start )) s"
	@touch $@

# helm, for the chart's tests, from its own module (cluster/helm/go.mod: its Kubernetes libraries
# are not those cluster/go.mod pins), with the version stamps helm's own Makefile sets; Go's build
# cache is the one above.
# The version go.mod $(1) requires of module $(2).
required = $(shell awk '{ for (i = 1; i < NF; i++) if ($$i == "$(2)") print $$(i + 1) }' $(1))
HELM_VERSION = $(call required,cluster/helm/go.mod,helm.sh/helm/v3)
HELM_K8S_MINOR = $(word 2,$(subst ., ,$(call required,cluster/helm/go.mod,k8s.io/client-go)))
HELM_LDFLAGS = -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	$(foreach pkg,helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil,\
	-X $(pkg).k8sVersionMajor=1 -X $(pkg).k8sVersionMinor=$(HELM_K8S_MINOR))

$(CLUSTER_BIN)/helm: cluster/helm/go.mod cluster/helm/go.sum
	@start=$$(date +%s); \
	CGO_ENABLED=0 GOFLAGS=-mod=readonly GOCACHE=$(CURDIR)/target/cluster/go-build \
		go -C cluster/helm build -trimpath -ldflags '$(HELM_LDFLAGS)' -o $(CURDIR)/$@ helm.sh/helm/v3/cmd/helm && \
	echo "cluster-bin: built helm $(HELM_VERSION) in $$(( $$(date +%s) - start )) s"

# cosign, which signs and verifies what make publish pushes, from its own module
# (cluster/cosign/go.mod) at the version it pins.
$(CLUSTER_BIN)/cosign: cluster/cosign/go.mod cluster/cosign/go.sum
	@start=$$(date +%s); \
	CGO_ENABLED=0 GOFLAGS=-mod=readonly GOCACHE=$(CURDIR)/target/cluster/go-build \
		go -C cluster/cosign build -trimpath -ldflags '-s -w' -o $(CURDIR)/$@ github.com/sigstore/cosign/v3/cmd/cosign && \
	echo "cluster-bin: built cosign $(call required,cluster/cosign/go.mod,github.com/sigstore/cosign/v3) in $$(( $$(date +%s) - start )) s"

# promtool, for `promtool test rules` of the chart's alerts (controller/tests/chart.rs), from
# Prometheus' Go module at the version cluster/prometheus/go.mod pins, without the cloud service
# discoveries (Prometheus' own `remove_all_sd` build tag: `test rules` reads none of them; they
# are most of the build).
$(CLUSTER_BIN)/promtool: cluster/prometheus/go.mod cluster/prometheus/go.sum
	@start=$$(date +%s); \
	CGO_ENABLED=0 GOFLAGS=-mod=readonly GOCACHE=$(CURDIR)/target/cluster/go-build \
		go -C cluster/prometheus build -trimpath -tags remove_all_sd -ldflags '-s -w' -o $(CURDIR)/$@ github.com/prometheus/prometheus/cmd/promtool && \
	echo "cluster-bin: built promtool $(call required,cluster/prometheus/go.mod,github.com/prometheus/prometheus) in $$(( $$(date +%s) - start )) s"

cluster-bin: $(CLUSTER_BIN)/.built $(CLUSTER_BIN)/helm $(CLUSTER_BIN)/promtool

# kwok, the fake kubelet of the cluster benchmarks' nodes (cluster/kwok-up.sh), from its own
# module (cluster/kwok/go.mod: its Kubernetes libraries are v0.36, not those cluster/go.mod pins).
# Not part of cluster-bin: only the cluster suites (make e2e-cluster) and the benchmarks run it.
$(CLUSTER_BIN)/kwok: cluster/kwok/go.mod cluster/kwok/go.sum
	@start=$$(date +%s); \
	CGO_ENABLED=0 GOFLAGS=-mod=readonly GOCACHE=$(CURDIR)/target/cluster/go-build \
		go -C cluster/kwok build -trimpath -ldflags '-s -w' -o $(CURDIR)/$@ sigs.k8s.io/kwok/cmd/kwok && \
	echo "cluster-bin: built kwok $(call required,cluster/kwok/go.mod,sigs.k8s.io/kwok) in $$(( $$(date +%s) - start )) s"

kwok-bin: $(CLUSTER_BIN)/kwok

# A real node for the chart's pods (controller/tests/node.rs, cluster/node-up.sh): the kubelet of
# the same pinned module, and the pause image its pods' sandboxes run, built here from
# Kubernetes' own build/pause/linux/pause.c in that module (static, by musl-gcc, as its Makefile
# builds it with gcc -static) into a FROM scratch image (cluster/pause/Containerfile), written as
# the OCI archive PAUSE_ARCHIVE. containerd's CRI plugin names it by PAUSE_IMAGE.
$(CLUSTER_BIN)/kubelet: cluster/go.mod cluster/go.sum
	@start=$$(date +%s); \
	$(GO_BUILD) -o $(CURDIR)/$@ k8s.io/kubernetes/cmd/kubelet && \
	echo "cluster-bin: built kubelet $(K8S_VERSION) in $$(( $$(date +%s) - start )) s"

PAUSE_VERSION := 3.10.1
PAUSE_IMAGE := localhost/pause:$(PAUSE_VERSION)
PAUSE_DIR := target/node/pause
PAUSE_ARCHIVE := target/node/pause.oci.tar
PAUSE_SOURCE = $(shell go -C cluster list -mod=readonly -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c

$(PAUSE_ARCHIVE): cluster/go.mod cluster/pause/Containerfile
	@command -v musl-gcc >/dev/null || { echo "musl-gcc not found: the pause binary builds with it (Debian: apt-get install musl-tools)"; exit 1; }
	@rm -rf $(PAUSE_DIR) && mkdir -p $(PAUSE_DIR)/context $(PAUSE_DIR)/tmp
	musl-gcc -Os -Wall -Werror -static -DVERSION=v$(PAUSE_VERSION)-ome-spread -o $(PAUSE_DIR)/context/pause $(PAUSE_SOURCE)
	strip $(PAUSE_DIR)/context/pause
	@$(PAUSE_BUILDAH) bud --quiet --isolation chroot --identity-label=false -f cluster/pause/Containerfile -t $(PAUSE_IMAGE) $(PAUSE_DIR)/context && \
	$(PAUSE_BUILDAH) push --quiet $(PAUSE_IMAGE) oci-archive:$(CURDIR)/$@:$(PAUSE_IMAGE); \
	status=$$?; rm -rf $(PAUSE_DIR); [ $$status -eq 0 ] && echo "pause-image: $(PAUSE_IMAGE), $@ of $$(wc -c < $@) bytes"

pause-image: $(PAUSE_ARCHIVE)

node-bin: $(CLUSTER_BIN)/kubelet $(PAUSE_ARCHIVE)

# deploy/'s plain manifests, rendered from the chart (charts/manifests.sh): after a chart change.
manifests: $(CLUSTER_BIN)/helm
	charts/manifests.sh $(CLUSTER_BIN)/helm deploy

# A control plane on 127.0.0.1 that stays up until `make cluster-down` (cluster/up.sh).
cluster-up: cluster-bin
	cluster/up.sh

# kwok beside it, playing the nodes annotated kwok.x-k8s.io/node=fake (cluster/kwok-up.sh);
# `make cluster-down` stops it with the rest.
kwok-up: kwok-bin
	cluster/kwok-up.sh

cluster-down:
	cluster/down.sh

# OME's how-to and every cluster test against a control plane of their own (cluster/e2e.sh):
# started, run, stopped, no process left. The OME stand-in, the admission host and the controller
# they start are built first; then, for the chart on a real node (controller/tests/node.rs), the
# image, the kubelet and the pause image, where the node's tools are installed (otherwise one
# line says which are missing; CI=true makes that a failure).
NODE_TOOLS := buildah musl-gcc docker-registry containerd ctr runc socat nsenter /usr/lib/cni/bridge
e2e-cluster: cluster-bin kwok-bin policy.wasm
	$(CARGO) test --quiet --workspace --no-run
	@missing="$(call missing,$(NODE_TOOLS))"; \
	if [ -z "$$missing" ]; then \
		$(MAKE) --no-print-directory image node-bin; \
	else \
		echo "the real node's suite is skipped: it needs $$missing (Debian: apt-get install buildah musl-tools docker-registry containerd runc socat containernetworking-plugins)"; \
		[ "$$CI" != true ]; \
	fi
	@missing="$(call missing,$(NODE_TOOLS))"; [ -n "$$missing" ] || export OME_SPREAD_E2E_NODE=1; cluster/e2e.sh

demo: wasm-target
	$(CARGO) run --quiet --example demo

# Criterion: the policy beside the SDK floor, the ratio table and both modules' sizes printed at the
# end; the core's diagnosis and rebalance passes over 1,000 replicas; what a pod event costs the
# controller; then the playground's diagnosis of the same cluster natively and in headless
# Chromium; then the controller under churn (see BENCHMARKS.md).
bench: wasm-target web
	$(CARGO) bench --bench policy
	$(CARGO) bench -p ome-spread-core --bench diagnosis
	$(CARGO) bench -p ome-spread-controller --bench pods
	$(CARGO) test --release -p ome-spread-web --test browser -- --ignored --nocapture
	$(MAKE) bench-churn

# The controller as built, its own process, against the in-memory API server under a minute of
# pod and node churn (controller/benches/churn.rs), beside the controller as it was at the commit
# CHURN_BASELINE_REV (taken from git history and built once under target/churn-baseline/REV), so
# that a change is seen side by side with the code it is measured against.
# CHURN_SECONDS sets the churn's length.
CHURN_BASELINE_REV := fe890ccda69099af7f6ce36568bf1ed11664b005
CHURN_BASELINE := target/churn-baseline/$(CHURN_BASELINE_REV)/target/release/ome-spread

$(CHURN_BASELINE):
	@git cat-file -e $(CHURN_BASELINE_REV)^{commit} 2>/dev/null || { echo "bench-churn needs the git history holding $(CHURN_BASELINE_REV)"; exit 1; }
	rm -rf target/churn-baseline/$(CHURN_BASELINE_REV)/src && mkdir -p target/churn-baseline/$(CHURN_BASELINE_REV)/src
	git archive $(CHURN_BASELINE_REV) | tar -x -C target/churn-baseline/$(CHURN_BASELINE_REV)/src
	$(CARGO) build --release --locked --quiet -p ome-spread-controller --bin ome-spread \
		--manifest-path target/churn-baseline/$(CHURN_BASELINE_REV)/src/Cargo.toml \
		--target-dir target/churn-baseline/$(CHURN_BASELINE_REV)/target

bench-churn: $(CHURN_BASELINE)
	$(CARGO) build --release --quiet -p ome-spread-controller --bin ome-spread
	OME_SPREAD_CHURN_CONTROLLER=$(CURDIR)/target/release/ome-spread OME_SPREAD_CHURN_BASELINE=$(CURDIR)/$(CHURN_BASELINE) \
		OME_SPREAD_CHURN_BASELINE_REV=$(CHURN_BASELINE_REV) \
		$(CARGO) bench -p ome-spread-controller --bench churn

# The same churn on a cluster of 100,000 pods: 90,000 pods of other workloads beside OME's 10,000
# (20,000 trainers, then fourteen DaemonSets' pods on each of the 5,000 nodes), for the
# controller's memory where a large GPU cluster's pods are mostly not OME's.
bench-churn-large:
	$(MAKE) bench-churn CHURN_OTHER_PODS=90000

# The benchmarks' large cluster on a real control plane of its own (sim/src/bin/bench-cluster.rs):
# kube-apiserver, kube-scheduler and kwok's 5,000 nodes, 10,000 OME pods created through an
# accept-all webhook and through the policy in turn (the policy's own cost, side by side), 20,000
# pods of other workloads, then the controller under CHURN_SECONDS (90) of churn at 20 events a
# second with kube-apiserver restarted halfway. That size is meant to fit in 15 minutes after the
# builds on two shared cores (BENCHMARKS.md has the runs), and its churn is what the API server
# answers there without a queue, so that the controller's own time is not the API server's backlog
# (make bench-churn runs 1,000 a second in memory). Not part of CI. The control plane is stopped at
# the end, pass or fail; its logs (an audit log of every deletion among them) stay in
# target/bench-cluster-logs. The controller is built alone, as the image and bench-churn build it:
# built with the driver, cargo would give the dependencies they share the driver's features too
# (serde_json's float_roundtrip, tokio's test-util, among others).
BENCH_CLUSTER_RUN := $(CURDIR)/target/bench-cluster
bench-cluster: $(CLUSTER_BIN)/.built $(CLUSTER_BIN)/kwok policy.wasm
	$(CARGO) build --release -p ome-spread-controller --bin ome-spread
	$(CARGO) build --release -p ome-spread-sim --bin bench-cluster
	@trap 'rm -rf $(BENCH_CLUSTER_RUN)-logs; cp -r $(BENCH_CLUSTER_RUN)/logs $(BENCH_CLUSTER_RUN)-logs; cluster/down.sh $(BENCH_CLUSTER_RUN)' EXIT; \
	cluster/up.sh $(BENCH_CLUSTER_RUN) && cluster/kwok-up.sh $(BENCH_CLUSTER_RUN) && \
	OME_SPREAD_BENCH_RUN=$(BENCH_CLUSTER_RUN) OME_SPREAD_CHURN_CONTROLLER=$(CURDIR)/target/release/ome-spread \
		target/release/bench-cluster

# cargo-fuzz on nightly: both targets, FUZZ_SECONDS each, the corpus seeded from the rule
# table's fixtures. libFuzzer prints the executions it ran ("Done N runs").
FUZZ_SECONDS ?= 300
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	python3 fuzz/seed_corpus.py
	cd fuzz && cargo +nightly fuzz run validate_bytes corpus/validate_bytes -- -max_total_time=$(FUZZ_SECONDS) -max_len=65536
	cd fuzz && cargo +nightly fuzz run validate_structured -- -max_total_time=$(FUZZ_SECONDS)

fmt:
	$(CARGO) fmt --all

# No function over 80 lines (clippy.toml's threshold, counted without blank and comment lines).
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings -W clippy::too_many_lines

clean:
	$(CARGO) clean
	rm -f policy.wasm annotated-policy.wasm
