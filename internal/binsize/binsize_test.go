package binsize

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestPackageOf(t *testing.T) {
	for sym, want := range map[string]string{
		"net/http.(*Transport).RoundTrip":                      "net/http",
		"type:*net/http.Header":                                "net/http",
		"type:.eq.github.com/a/b.T":                            "github.com/a/b",
		"go:itab.*os.File,io.Reader":                           "os",
		"slices.Sort[go.shape.int]":                            "slices",
		"github.com/openai/openai-go/v3/packages/param.Opt":    "github.com/openai/openai-go/v3/packages/param",
		"github.com/a/b.MarshalWithExtras[go.shape.struct {}]": "github.com/a/b",
		"gopkg.in/natefinch/lumberjack.v2.(*Logger).Write":     "gopkg.in/natefinch/lumberjack",
		"main.main":                         "main",
		"runtime.mallocgc":                  "runtime",
		"vendor/golang.org/x/net/idna.init": "vendor/golang.org/x/net/idna",
	} {
		if got := PackageOf(sym); got != want {
			t.Errorf("PackageOf(%q) = %q, want %q", sym, got, want)
		}
	}
}

// TestAttribute builds a small program both ways and checks that the shares
// add up to the stripped file and land on the packages that own the bytes.
func TestAttribute(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program twice")
	}
	dir := t.TempDir()
	un, st := filepath.Join(dir, "tiny"), filepath.Join(dir, "tiny.stripped")
	ctx := context.Background()
	if err := Build(ctx, ".", "./testdata/tiny", un, false); err != nil {
		t.Fatal(err)
	}
	if err := Build(ctx, ".", "./testdata/tiny", st, true); err != nil {
		t.Fatal(err)
	}
	r, err := Attribute(un, st)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(un)
	if r.File <= 0 || r.File >= fi.Size() {
		t.Fatalf("stripped %d bytes, unstripped %d: -s -w not applied?", r.File, fi.Size())
	}
	var sum int64
	seen := map[string]Size{}
	for _, p := range r.Packages {
		sum += p.Bytes
		seen[p.Name] = p
	}
	// Integer division loses at most a byte per package.
	if d := r.File - sum; d < 0 || d > int64(len(r.Packages)) {
		t.Errorf("packages add up to %d of %d bytes", sum, r.File)
	}
	for _, p := range []string{"main", "fmt", "runtime", "os"} {
		if seen[p].Code == 0 {
			t.Errorf("package %s has no code in the report: %v", p, r.Packages[:5])
		}
	}
	if r.Modules[0].Name != "std" {
		t.Errorf("largest module %q, want std", r.Modules[0].Name)
	}
	if r.Symbols <= 0 {
		t.Error("no symbol counted")
	}
	if _, err := Attribute(st, st); err == nil {
		t.Error("a stripped binary as the unstripped one: no error")
	}
	var b strings.Builder
	if err := Table(&b, "package", r.Packages, r.File, 3); err != nil {
		t.Fatal(err)
	}
	if rows := strings.Count(b.String(), "\n"); rows != 5 {
		t.Errorf("table of 3 has %d lines:\n%s", rows, b.String())
	}
}

// TestMakefileAgrees keeps the Makefile's RELEASE_TAGS (make build, make
// release, the container image) equal to ReleaseTags, which the benchmarks
// build with.
func TestMakefileAgrees(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RELEASE_TAGS\s*\??=\s*(\S+)\s*$`).FindSubmatch(mk)
	if m == nil || string(m[1]) != ReleaseTags {
		t.Fatalf("Makefile RELEASE_TAGS = %q, internal/binsize.ReleaseTags = %q: make them equal", m, ReleaseTags)
	}
	for _, want := range []string{"build -trimpath -tags $(RELEASE_TAGS) -ldflags '$(LDFLAGS)'", "$(TAGS),$(RELEASE_TAGS) -ldflags", "RELEASE_TAGS=$(RELEASE_TAGS)"} {
		if !strings.Contains(string(mk), want) {
			t.Errorf("Makefile has no %q: a build without the release tags", want)
		}
	}
	sh, err := os.ReadFile("../../images/conch/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sh), "${RELEASE_TAGS:-"+ReleaseTags+"}") {
		t.Errorf("images/conch/build.sh does not build with RELEASE_TAGS (default %s)", ReleaseTags)
	}
}
