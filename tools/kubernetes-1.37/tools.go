//go:build tools

// Package tools pins the one command built from this module (kube-apiserver of the newer minor), so `go mod tidy`
// keeps its dependencies.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
