package web

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestVendoredXtermIsTheRecordedOne checks the embedded xterm.js files
// against the checksums in static/xterm/README.md, so an update of the
// vendored files is deliberate and documented.
func TestVendoredXtermIsTheRecordedOne(t *testing.T) {
	readme, err := staticFS.ReadFile("static/xterm/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"xterm.js", "xterm.css"} {
		b, err := staticFS.ReadFile("static/xterm/" + name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		want := "- " + name + " "
		var recorded string
		for _, l := range strings.Split(string(readme), "\n") {
			if strings.HasPrefix(l, want) {
				recorded = strings.TrimSpace(strings.TrimPrefix(l, want))
			}
		}
		if got := hex.EncodeToString(sum[:]); got != recorded {
			t.Errorf("%s: sha256 %s, README records %q", name, got, recorded)
		}
		if strings.Contains(string(b), "sourceMappingURL") {
			t.Errorf("%s refers to a source map that is not shipped", name)
		}
	}
}

// TestPagesUseOnlyEmbeddedAssets: no CDN, every script and style the pages
// load is served from the binary.
func TestPagesUseOnlyEmbeddedAssets(t *testing.T) {
	for _, page := range []string{"static/index.html", "static/dashboard.html"} {
		b, err := staticFS.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, attr := range []string{`src="`, `href="`} {
			rest := string(b)
			for {
				i := strings.Index(rest, attr)
				if i < 0 {
					break
				}
				rest = rest[i+len(attr):]
				ref := rest[:strings.IndexByte(rest, '"')]
				if !strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "//") {
					t.Errorf("%s loads %q from outside conch", page, ref)
					continue
				}
				if p, ok := strings.CutPrefix(ref, "/static/"); ok {
					if _, err := staticFS.ReadFile("static/" + p); err != nil {
						t.Errorf("%s loads %q, which is not embedded", page, ref)
					}
				}
			}
		}
	}
}
