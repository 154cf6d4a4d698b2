package docker_test

import (
	"strings"
	"testing"

	"conch/internal/testenv/engine"
	"conch/sandbox/docker"
)

func TestInfo(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt := newRuntime(t, eng, nil)
		ctx := ctxT(t)
		info, err := rt.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Engine != eng.Name || info.Version == "" || !strings.HasPrefix(info.APIVersion, "1.") {
			t.Errorf("got %+v, want engine %s with a version and an API version 1.x", info, eng.Name)
		}
		probed, err := docker.Probe(ctx, eng.Host, "auto")
		if err != nil || probed.Engine != eng.Name {
			t.Errorf("Probe: got %+v, %v; want engine %s", probed, err, eng.Name)
		}
		other := map[string]string{"docker": "podman", "podman": "docker"}[eng.Name]
		if _, err := docker.Probe(ctx, eng.Host, other); err == nil {
			t.Errorf("Probe with engine %s at a %s socket: got no error", other, eng.Name)
		}
	})
}
