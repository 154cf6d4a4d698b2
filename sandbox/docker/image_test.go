package docker_test

import (
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	sandboximage "conch/images/sandbox"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"

	"github.com/moby/moby/client"
)

// TestImageBuild: a missing image is built on first use with progress
// lines; one from an older definition is rebuilt and new sandboxes use it;
// an operator's own image (no conch label) is left alone.
func TestImageBuild(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		tag := "conch-sandbox:buildtest-" + strings.TrimPrefix(newInstance(), "test-")
		api := eng.Client(t)
		ctx := ctxT(t)
		t.Cleanup(func() { _, _ = api.ImageRemove(ctx, tag, client.ImageRemoveOptions{Force: true}) })
		var mu sync.Mutex
		var lines []string
		rt := newRuntime(t, eng, func(o *docker.Options) {
			o.Image = tag
			o.BuildProgress = func(s string) { mu.Lock(); lines = append(lines, s); mu.Unlock() }
		})
		imageHash := func() string {
			ins, err := api.ImageInspect(ctx, tag)
			if err != nil {
				t.Fatalf("inspect %s: %v", tag, err)
			}
			return ins.Config.Labels[sandboximage.HashLabel]
		}

		sb, err := rt.Sandbox(ctx, key("!image:example.org"))
		if err != nil {
			t.Fatalf("first use without the image: %v", err)
		}
		if got := imageHash(); got != sandboximage.Hash() {
			t.Errorf("built image hash %q, want %q", got, sandboximage.Hash())
		}
		mu.Lock()
		text := strings.Join(lines, "\n")
		mu.Unlock()
		if !strings.Contains(text, "missing; building") || !strings.Contains(text, "ready") {
			t.Errorf("progress lines %q, want a missing-image notice and a ready line", text)
		}
		if r := run(t, sb, "id", "-un"); out(r) != "conch" {
			t.Errorf("user in the built image: got %q, want conch", out(r))
		}

		// An older definition: same rootfs, another hash label.
		importAs(t, eng, tag, "LABEL "+sandboximage.HashLabel+"=0123456789abcdef", "LABEL "+sandboximage.RefLabel+"="+tag)
		older, err := api.ImageInspect(ctx, tag)
		if err != nil {
			t.Fatal(err)
		}
		rt2 := reopen(t, eng, rt.opts)
		if _, err := rt2.EnsureImage(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got := imageHash(); got != sandboximage.Hash() {
			t.Errorf("after a definition change: image hash %q, want rebuilt as %q", got, sandboximage.Hash())
		}
		// The image of the older definition is pruned (no container uses it).
		if _, err := api.ImageInspect(ctx, older.ID); err == nil {
			t.Errorf("the image of the older definition (%s) was kept after the rebuild", older.ID)
		}

		// An operator's image without our label is used as it is.
		importAs(t, eng, tag)
		rt3 := reopen(t, eng, rt.opts)
		if _, err := rt3.EnsureImage(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got := imageHash(); got != "" {
			t.Errorf("operator's image was rebuilt (label %q), want it left alone", got)
		}
	})
}

// importAs imports the cached rootfs under tag with the image config and
// the given LABEL changes instead of conch's labels (one label each: Podman
// reads one key=value per LABEL change).
func importAs(t *testing.T, eng *engine.Engine, tag string, labels ...string) {
	t.Helper()
	path, err := sandboximage.CachedRootfs(ctxT(t), sandboximage.RootfsOptions{CacheDir: eng.CacheDir})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var changes []string
	for _, c := range sandboximage.Changes(tag) {
		if !strings.HasPrefix(c, "LABEL ") {
			changes = append(changes, c)
		}
	}
	changes = append(changes, labels...)
	rc, err := eng.Client(t).ImageImport(ctxT(t), client.ImageImportSource{Source: f, SourceName: "-"}, tag, client.ImageImportOptions{Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b := new(strings.Builder)
	if _, err := io.Copy(b, rc); err != nil || strings.Contains(b.String(), `"error"`) {
		t.Fatalf("import: %v %s", err, b)
	}
}
