package sandboxd

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(body, "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
}

func copyTree(t *testing.T, src, dst string) bool {
	t.Helper()
	h, err := TreeHash(src)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := PackTree(src, &buf); err != nil {
		t.Fatal(err)
	}
	changed, err := UnpackTree(dst, h, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := TreeHash(dst); err != nil || got != h {
		t.Fatalf("unpacked tree hash %s (%v), want %s", got, err, h)
	}
	return changed
}

func TestTreeCopy(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeTree(t, src, map[string]string{
		"pdf/SKILL.md":          "---\nname: pdf\n---\nuse it",
		"pdf/scripts/run.sh":    "#!/bin/sh\necho hi\n",
		"notes/SKILL.md":        "notes",
		".pdf.fp":               "host bookkeeping",
		".tmp-half/SKILL.md":    "half written",
		"notes/.hidden/file.md": "inside a skill dots are files like any",
	})
	empty, err := TreeHash(filepath.Join(src, "missing"))
	if err != nil {
		t.Fatalf("a missing tree: %v", err)
	}
	if h, _ := TreeHash(src); h == empty {
		t.Fatal("a tree hashes like an empty one")
	}
	if !copyTree(t, src, dst) {
		t.Fatal("first copy reported unchanged")
	}
	if fi, err := os.Stat(filepath.Join(dst, "pdf/scripts/run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("script mode: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dst, ".tmp-half")); err == nil {
		t.Fatal("a dot entry of the host was copied")
	}
	if b, err := os.ReadFile(filepath.Join(dst, "notes/.hidden/file.md")); err != nil || !strings.HasPrefix(string(b), "inside") {
		t.Fatalf("nested dot file: %q %v", b, err)
	}
	if copyTree(t, src, dst) {
		t.Fatal("an unchanged tree was unpacked again")
	}

	// A skill changed, one removed, one added.
	writeTree(t, src, map[string]string{"pdf/SKILL.md": "v2", "new/SKILL.md": "new"})
	if err := os.RemoveAll(filepath.Join(src, "notes")); err != nil {
		t.Fatal(err)
	}
	if !copyTree(t, src, dst) {
		t.Fatal("a changed tree reported unchanged")
	}
	if _, err := os.Stat(filepath.Join(dst, "notes")); err == nil {
		t.Fatal("a removed skill stayed")
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "pdf/SKILL.md")); string(b) != "v2" {
		t.Fatalf("changed file: %q", b)
	}
	left, _ := os.ReadDir(dst)
	for _, e := range left {
		if strings.HasPrefix(e.Name(), ".tmp-") || strings.HasPrefix(e.Name(), ".old-") {
			t.Fatalf("left behind: %s", e.Name())
		}
	}
}

func TestTreeUnpackRefuses(t *testing.T) {
	for name, hdr := range map[string]*tar.Header{
		"escape":   {Name: "../x", Typeflag: tar.TypeReg, Mode: 0o644},
		"absolute": {Name: "/etc/x", Typeflag: tar.TypeReg, Mode: 0o644},
		"dot top":  {Name: ".conch-tree-hash", Typeflag: tar.TypeReg, Mode: 0o644},
		"symlink":  {Name: "a/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		"too big":  {Name: "a/big", Typeflag: tar.TypeReg, Mode: 0o644, Size: MaxTreeBytes + 1},
	} {
		t.Run(name, func(t *testing.T) {
			dst := t.TempDir()
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			_ = tw.WriteHeader(hdr)
			_ = tw.Close()
			if _, err := UnpackTree(dst, "h1", &buf); err == nil {
				t.Fatal("accepted")
			}
			left, _ := os.ReadDir(dst)
			if len(left) != 0 {
				t.Fatalf("left %d entries", len(left))
			}
		})
	}
	if _, err := UnpackTree(t.TempDir(), "", strings.NewReader("")); err == nil {
		t.Fatal("no hash accepted")
	}
}
