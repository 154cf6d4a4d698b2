package npmpin

import (
	"os"
	"strings"
	"testing"
)

func TestFromLock(t *testing.T) {
	lock, err := os.ReadFile("../mcp/testdata/server-everything.lock.json")
	if err != nil {
		t.Fatal(err)
	}
	in, err := FromLock("mcp-everything", "mcp-everything", "@modelcontextprotocol/server-everything", "2026.8.31", "", lock)
	if err != nil {
		t.Fatal(err)
	}
	if in.Tarballs[0].Package != Node().Package {
		t.Errorf("first tarball %s, want Node", in.Tarballs[0].Package)
	}
	byDir := map[string]Tarball{}
	for _, tb := range in.Tarballs[1:] {
		if _, err := tb.SHA512(); err != nil {
			t.Errorf("%s: %v", tb.Package, err)
		}
		if !strings.HasPrefix(tb.Dir, "mcp-everything/node_modules/") {
			t.Errorf("%s laid out at %s", tb.Package, tb.Dir)
		}
		byDir[tb.Dir] = tb
	}
	root, ok := byDir["mcp-everything/node_modules/@modelcontextprotocol/server-everything"]
	if !ok || root.Version != "2026.8.31" {
		t.Fatalf("the package itself is not pinned: %+v", root)
	}
	if _, ok := byDir["mcp-everything/node_modules/@modelcontextprotocol/sdk"]; !ok {
		t.Error("a dependency is missing")
	}
	if !strings.Contains(in.Wrapper, Dir+"/mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js") {
		t.Errorf("wrapper %q", in.Wrapper)
	}

	for _, tc := range []struct {
		pkg, version, bin, lock, want string
	}{
		{"@modelcontextprotocol/server-everything", "1.0.0", "", string(lock), "not 1.0.0"},
		{"left-pad", "1.0.0", "", string(lock), "does not hold"},
		{"@modelcontextprotocol/server-everything", "2026.8.31", "nope", string(lock), "no command"},
		{"x", "1", "", `{"lockfileVersion":1,"dependencies":{}}`, "lockfileVersion 2"},
		{"x", "1", "", `{"lockfileVersion":3,"packages":{"node_modules/x":{"version":"1","bin":{"x":"x.js"},"integrity":"sha512-` + strings.Repeat("A", 86) + `=="},"node_modules/y":{"version":"1","hasInstallScript":true}}}`, "install script"},
		{"x", "1", "", `{"lockfileVersion":3,"packages":{"node_modules/x":{"version":"1","bin":{"x":"x.js"},"integrity":"sha1-abc"}}}`, "sha512"},
		{"x", "1", "", `{"lockfileVersion":3,"packages":{"node_modules/x":{"version":"1","bin":{"x":"x.js"},"integrity":"sha512-` + strings.Repeat("A", 86) + `=="},"node_modules/w":{"version":"1","os":["win32"]}}}`, "not linux"},
	} {
		_, err := FromLock("mcp-x", "mcp-x", tc.pkg, tc.version, tc.bin, []byte(tc.lock))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s@%s: %v, want an error with %q", tc.pkg, tc.version, err, tc.want)
		}
	}
	ok2 := `{"lockfileVersion":3,"packages":{"node_modules/x":{"version":"1","bin":{"x":"x.js"},"integrity":"sha512-` + strings.Repeat("A", 86) + `=="},"node_modules/w":{"version":"1","os":["darwin"],"optional":true}}}`
	in, err = FromLock("mcp-x", "mcp-x", "x", "1", "", []byte(ok2))
	if err != nil || len(in.Tarballs) != 2 {
		t.Errorf("an optional package for another platform is left out: %+v, %v", in.Tarballs, err)
	}
}
