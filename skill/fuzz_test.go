package skill

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse reads SKILL.md files as anyone may write them (a workspace
// skill comes from the sandbox). Parse never fails: whatever the input, the
// skill is usable with a safe name and a description, or broken with a
// reason. `go test` runs the seeds (the bundled skills among them) and
// testdata/fuzz; `make fuzz` explores further.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"---\nname: pdf\ndescription: Reads PDFs. Use when a PDF arrives.\n---\n# PDF\n",
		"---\r\nname: x\r\ndescription: d\r\nmetadata:\r\n  a: 1\r\n  b: [1, 2]\r\nallowed-tools: Bash(git:*) Read\r\n---\r\nbody",
		"\xef\xbb\xbf---\ndescription: unquoted: colon here\n---\n",
		"---\ndescription: x\nname: ../../etc\n---\n",
		"---\ndescription: [1, 2]\nname: {a: b}\nmetadata: 7\nextra: true\n---",
		"---\n---\n",
		"---\n- a\n- b\n---\n",
		"---\na: &a [*a]\ndescription: x\n---\n",
		"---\nx: &x [1]\ny: &y [*x, *x, *x, *x, *x, *x, *x, *x]\nz: [*y, *y, *y, *y, *y, *y, *y, *y]\ndescription: d\n---\n",
		"no front matter",
		"",
	} {
		f.Add("pdf", []byte(s))
	}
	if dirs, _ := filepath.Glob("bundled/*/SKILL.md"); len(dirs) > 0 {
		for _, p := range dirs {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(filepath.Base(filepath.Dir(p)), b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, folder string, data []byte) {
		s := Parse(folder, data)
		if !s.OK() {
			if strings.TrimSpace(s.Broken) == "" {
				t.Fatal("broken without a reason")
			}
			return
		}
		if !safeName.MatchString(s.Name) {
			t.Fatalf("usable skill with the unsafe name %q", s.Name)
		}
		if s.Name != folder && !strings.Contains(strings.Join(s.Warnings, "\n"), "folder") {
			t.Fatalf("name %q differs from folder %q without a warning", s.Name, folder)
		}
		if s.Description == "" || s.Description != strings.TrimSpace(s.Description) {
			t.Fatalf("usable skill with description %q", s.Description)
		}
		for _, tool := range s.AllowedTools {
			if tool == "" || strings.ContainsAny(tool, " \t\n") {
				t.Fatalf("allowed tool %q is not one word", tool)
			}
		}
	})
}
