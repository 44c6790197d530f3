//go:build tools

// The promtool command, required so that go.mod and go.sum pin it and what it builds from.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
