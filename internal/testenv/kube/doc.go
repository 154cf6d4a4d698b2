// Package kube starts a REAL Kubernetes control plane for tests: etcd and
// kube-apiserver (built from their Go modules into a cache, see
// build/control), on 127.0.0.1 with TLS, client certificates and RBAC, and a
// test node (node.go) that plays the kubelet's part towards the API server:
// it registers a Node, binds pods and claims, runs each pod's containers in
// the test Docker engine (internal/testenv/engine) and serves the kubelet's
// exec endpoint with the kubelet's own streaming server (k8s.io/cri-streaming),
// so exec, SPDY/WebSocket translation, RBAC and admission all cross the real
// API server.
//
// The tests that use it carry the build tag kubernetes and run with
// `make kube-e2e`; the default test command neither builds nor skips them.
package kube
