package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Containerfile and the offline build must install the same packages.
func TestContainerfileMatchesPackages(t *testing.T) {
	m := regexp.MustCompile(`(?s)--no-install-recommends(.*?)&&`).FindSubmatch(containerfile)
	if m == nil {
		t.Fatal("no apt-get install line in the Containerfile")
	}
	got := strings.Fields(strings.ReplaceAll(string(m[1]), "\\", " "))
	slices.Sort(got)
	want := slices.Clone(Packages)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Containerfile installs %v, Packages are %v", got, want)
	}
	for _, line := range []string{"USER " + User, "WORKDIR " + WorkingDir, "ENV LANG=C.UTF-8", "COPY setup.sh"} {
		if !bytes.Contains(containerfile, []byte(line)) {
			t.Errorf("Containerfile lacks %q", line)
		}
	}
}

func TestHashAndChanges(t *testing.T) {
	h := Hash()
	if len(h) != 16 || h != Hash() {
		t.Fatalf("Hash %q: want 16 stable hex digits", h)
	}
	cs := Changes("conch-sandbox:latest")
	for _, want := range []string{"USER 1000:1000", "WORKDIR /workspace", `CMD ["sleep", "infinity"]`, "LABEL " + HashLabel + "=" + h, "ENV LANG=C.UTF-8"} {
		if !slices.Contains(cs, want) {
			t.Errorf("Changes %q lack %q", cs, want)
		}
	}
	// A changed definition changes the hash.
	old := setupScript
	setupScript = append(bytes.Clone(old), "\n# changed\n"...)
	defer func() { setupScript = old }()
	if Hash() == h {
		t.Errorf("changing setup.sh did not change the hash")
	}
}

func TestBuildContext(t *testing.T) {
	b, err := BuildContext()
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(b))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if !slices.Equal(names, []string{"Containerfile", "setup.sh"}) {
		t.Errorf("build context has %v", names)
	}
}

func TestMirrorIn(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"deb822", `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main`, "http://deb.debian.org/debian"},
		{"security only", "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n", ""},
		{"one-line", "# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main contrib\n", "http://mirror.example/debian"},
		{"other suite", "deb http://mirror.example/debian trixie main\n", ""},
		{"deb-src only", "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n", ""},
	}
	for _, tt := range tests {
		if got := mirrorIn(tt.text); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
	dir := t.TempDir()
	if got := MirrorFromAptSources(dir); got != DefaultMirror {
		t.Errorf("no sources: got %q, want the default", got)
	}
	os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "sources.list.d", "debian.sources"), []byte("Types: deb\nURIs: http://local/debian\nSuites: bookworm\n"), 0o644)
	if got := MirrorFromAptSources(dir); got != "http://local/debian" {
		t.Errorf("sources.list.d: got %q", got)
	}
}

func TestWriteTar(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "dev"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "etc", "a"), []byte("hello"), 0o640))
	must(os.Link(filepath.Join(dir, "etc", "a"), filepath.Join(dir, "etc", "b")))
	must(os.Symlink("a", filepath.Join(dir, "etc", "l")))
	must(os.WriteFile(filepath.Join(dir, "dev", "null-ish"), nil, 0o644))
	var buf bytes.Buffer
	must(WriteTar(context.Background(), &buf, dir))
	got := map[string]*tar.Header{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(err)
		got[h.Name] = h
	}
	if h := got["etc/a"]; h == nil || h.Size != 5 || h.Mode&0o777 != 0o640 || h.Uname != "" {
		t.Errorf("etc/a: got %+v", h)
	}
	if h := got["etc/b"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "etc/a" {
		t.Errorf("hard link: got %+v, want a link to etc/a", h)
	}
	if h := got["etc/l"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "a" {
		t.Errorf("symlink: got %+v", h)
	}
	if got["dev/"] == nil || got["dev/null-ish"] != nil {
		t.Errorf("dev: got dir %v and content %v, want the dir only", got["dev/"] != nil, got["dev/null-ish"] != nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WriteTar(ctx, io.Discard, dir); err == nil {
		t.Errorf("cancelled: got no error")
	}
}

func TestCachedRootfsNeedsCacheDir(t *testing.T) {
	if _, err := CachedRootfs(context.Background(), RootfsOptions{}); err == nil {
		t.Errorf("no cache dir: got no error")
	}
	// A cached tarball is returned without building.
	dir := t.TempDir()
	if err := os.WriteFile(RootfsPath(dir), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := CachedRootfs(context.Background(), RootfsOptions{CacheDir: dir, Debootstrap: "/nonexistent"})
	if err != nil || p != RootfsPath(dir) {
		t.Errorf("cached: got %q, %v", p, err)
	}
}
