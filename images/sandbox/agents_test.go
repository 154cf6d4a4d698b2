package sandbox

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"conch/coders"
)

var update = flag.Bool("update", false, "rewrite Containerfile.agents from the pins")

// Containerfile.agents is generated from the pins: the Go build and the
// registry build install the same versions, checked against the same digests.
func TestAgentsContainerfile(t *testing.T) {
	want, err := AgentsContainerfile()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("Containerfile.agents", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("Containerfile.agents")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Containerfile.agents is not what the pins give; run: go test ./images/sandbox -run TestAgentsContainerfile -update")
	}
	for _, a := range AgentsOf(coders.Builtin()) {
		for _, tb := range a.Tarballs {
			sum, err := tb.SHA512()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(got, []byte("--checksum=sha512:"+sum+" \\\n\t"+tb.URL(DefaultRegistry))) {
				t.Errorf("Containerfile.agents lacks the pinned %s@%s with its checksum", tb.Package, tb.Version)
			}
		}
		if !bytes.Contains(got, []byte(AgentVersionLabel(a.Name)+`="`+a.Version+`"`)) {
			t.Errorf("Containerfile.agents lacks the version label of %s", a.Name)
		}
	}
}

func TestLookupAgentsAndHash(t *testing.T) {
	as, err := LookupAgents([]string{"gemini", "claude", "gemini"})
	if err != nil || len(as) != 2 || as[0].Name != "claude" || as[1].Name != "gemini" {
		t.Fatalf("LookupAgents: got %v, %v; want claude, gemini in that order", as, err)
	}
	if _, err := LookupAgents([]string{"aider"}); err == nil || !strings.Contains(err.Error(), "claude, codex, gemini") {
		t.Errorf("unknown agent: got %v, want an error naming the known ones", err)
	}
	h := AgentsHash("base1", as)
	if len(h) != 16 || h != AgentsHash("base1", as) {
		t.Fatalf("hash %q not stable", h)
	}
	if AgentsHash("base2", as) == h {
		t.Errorf("another base gave the same hash")
	}
	changed := []Agent{as[0], as[1].Clone()}
	changed[1].Tarballs[0].Version = "0.61.1"
	if AgentsHash("base1", changed) == h {
		t.Errorf("a changed pin gave the same hash")
	}
	if as[1].Tarballs[0].Version != "0.61.0" || AgentsOf(coders.Builtin())[2].Tarballs[0].Version != "0.61.0" {
		t.Errorf("changing a looked-up agent changed the pins")
	}
	if got := AgentsRef(as, h); got != "conch-sandbox-claude-gemini:"+h {
		t.Errorf("ref %q", got)
	}
	l := AgentLabels(as, h)
	if l[AgentsLabel] != "claude,gemini" || l[AgentVersionLabel("claude")] != as[0].Version || l[AgentsHashLabel] != h {
		t.Errorf("labels %v", l)
	}
	if n, ok := AgentFromLabel(AgentVersionLabel("codex")); !ok || n != "codex" {
		t.Errorf("AgentFromLabel: %q %v", n, ok)
	}
	if got := as[0].Tarballs[0].URL("http://r/"); got != "http://r/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-2.1.330.tgz" {
		t.Errorf("URL %q", got)
	}
}

// fakePackage is a gzipped npm tarball with the given files.
func fakePackage(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for name, body := range files {
		mode := int64(0o644)
		if strings.HasSuffix(name, "/bin") || strings.Contains(name, "/bin/") {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg, Uid: 1001, Uname: "builder"}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	var gz bytes.Buffer
	zw := newGzip(&gz)
	zw.Write(raw.Bytes())
	zw.Close()
	return gz.Bytes()
}

func integrity(b []byte) string {
	s := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(s[:])
}

// TestFetchTarball: downloads go through the cache and are checked against
// the pin; a registry serving other bytes is a clear error and nothing is
// kept; a cached file that no longer matches is downloaded again.
func TestFetchTarball(t *testing.T) {
	good := fakePackage(t, map[string]string{"package/bin/tool": "#!/bin/sh\necho hi\n", "package/include/x.h": "x"})
	bad := fakePackage(t, map[string]string{"package/bin/tool": "evil"})
	var serve atomic.Value
	serve.Store(good)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/@scope/tool-linux/-/tool-linux-1.0.0.tgz" {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		w.Write(serve.Load().([]byte))
	}))
	defer srv.Close()
	tb := Tarball{Package: "@scope/tool-linux", Version: "1.0.0", Integrity: integrity(good), From: "package/", Dir: "tool", Skip: []string{"include/"}}
	var progress []string
	o := FetchOptions{Registry: srv.URL, CacheDir: t.TempDir(), Progress: func(s string) { progress = append(progress, s) }}
	ctx := context.Background()

	p, err := FetchTarball(ctx, o, tb)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, good) || hits.Load() != 1 {
		t.Fatalf("first fetch: %d hits, content ok %v", hits.Load(), bytes.Equal(b, good))
	}
	if len(progress) == 0 || !strings.Contains(progress[len(progress)-1], "downloaded @scope/tool-linux@1.0.0") {
		t.Errorf("progress %q", progress)
	}
	if _, err := FetchTarball(ctx, o, tb); err != nil || hits.Load() != 1 {
		t.Errorf("cached fetch: %v, %d hits; want no download", err, hits.Load())
	}

	// A cached file that no longer matches is fetched again.
	os.WriteFile(p, []byte("corrupt"), 0o644)
	if _, err := FetchTarball(ctx, o, tb); err != nil || hits.Load() != 2 {
		t.Errorf("corrupt cache: %v, %d hits; want a new download", err, hits.Load())
	}

	// The registry serves other bytes: refused, nothing kept.
	serve.Store(bad)
	os.Remove(p)
	_, err = FetchTarball(ctx, o, tb)
	if !errors.Is(err, ErrIntegrity) || !strings.Contains(err.Error(), tb.Integrity) {
		t.Errorf("mismatch: got %v, want ErrIntegrity naming the pin", err)
	}
	if _, serr := os.Stat(p); serr == nil {
		t.Errorf("a mismatching download was kept")
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".download-") {
			t.Errorf("temp file %s left behind", e.Name())
		}
	}

	// A missing package is an error with the status.
	_, err = FetchTarball(ctx, o, Tarball{Package: "nope", Version: "1", Integrity: tb.Integrity})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing package: got %v", err)
	}

	// The layer: root owned, From stripped, Skip left out, a wrapper.
	serve.Store(good)
	paths, err := FetchAgents(ctx, o, []Agent{{Name: "tool", Tarballs: []Tarball{tb}, Wrapper: "#!/bin/sh\nexec x\n"}})
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	if err := WriteAgentsTar(ctx, &layer, []Agent{{Name: "tool", Tarballs: []Tarball{tb}, Wrapper: "#!/bin/sh\nexec x\n"}}, paths); err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	tr := tar.NewReader(&layer)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" {
			t.Errorf("%s owned by %d/%q, want root", h.Name, h.Uid, h.Uname)
		}
	}
	if h := got["opt/conch-agents/tool/bin/tool"]; h == nil || h.Mode != 0o755 {
		t.Errorf("tool binary: %+v", h)
	}
	if got["opt/conch-agents/tool/include/x.h"] != nil {
		t.Errorf("skipped path installed")
	}
	if h := got["usr/local/bin/tool"]; h == nil || h.Mode != 0o755 || h.Size != int64(len("#!/bin/sh\nexec x\n")) {
		t.Errorf("wrapper: %+v", h)
	}
	if got["opt/conch-agents/"] == nil || got["opt/conch-agents/tool/bin/"] == nil {
		t.Errorf("directories missing: %v", got)
	}
}

func newGzip(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }
