//go:build tools

// Package tools pins the commands built from this module, so `go mod tidy` keeps their dependencies.
package tools

import (
	_ "sigs.k8s.io/controller-runtime/examples/builtins"
)
