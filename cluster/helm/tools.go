//go:build tools

// The helm command, required so that go.mod and go.sum pin it and what it builds from.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
