//go:build tools

// Package tools pins the Kubernetes API server (and the kubelet of the
// real-kubelet tier) this module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
