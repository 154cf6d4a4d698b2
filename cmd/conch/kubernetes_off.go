//go:build !kubernetes

package main

import (
	"context"
	"errors"

	"conch/config"
)

// errNoKubernetes: this binary was built without the Kubernetes backend
// (client-go is left out of the default build).
var errNoKubernetes = errors.New(`sandbox.backend = "kubernetes" needs a conch built with the kubernetes tag: ` +
	"go build -tags goolm,kubernetes ./cmd/conch (make build-kubernetes)")

func startKubernetes(context.Context, *deps, string) (sandboxRuntime, error) {
	return nil, errNoKubernetes
}

func (a *app) doctorKubernetes(_ context.Context, _ *config.Config, check func(string, error, string)) {
	check("kubernetes", errNoKubernetes, "")
}
