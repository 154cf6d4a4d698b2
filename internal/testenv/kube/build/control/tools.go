//go:build tools

// Package tools pins the Kubernetes API server this module builds.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
