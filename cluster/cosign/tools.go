//go:build tools

// The cosign command, required so that go.mod and go.sum pin it and what it builds from.
package tools

import _ "github.com/sigstore/cosign/v3/cmd/cosign"
