package web

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestScriptsDeclareEachFunctionOnce: a page's scripts are plain scripts
// sharing one global scope (common.js and the page's own), where a second
// top-level `function f` silently replaces the first (two features'
// helpers once collided this way and one of them stopped working without
// an error).
func TestScriptsDeclareEachFunctionOnce(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^(?:async\s+)?function\s+([A-Za-z_$][\w$]*)\s*\(`)
	funcs := func(path string) []string {
		b, err := fs.ReadFile(staticFS, path)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
		return names
	}
	shared := funcs("static/common.js")
	pages, err := fs.Glob(staticFS, "static/*.js")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, page := range pages {
		if page == "static/common.js" {
			continue
		}
		seen := map[string]string{}
		for _, n := range shared {
			seen[n] = "static/common.js"
		}
		for _, n := range funcs(page) {
			read++
			if prev, ok := seen[n]; ok {
				t.Errorf("function %s is declared in %s and again in %s", n, prev, page)
			}
			seen[n] = page
		}
	}
	if read < 10 || !strings.Contains(strings.Join(pages, " "), "chat.js") {
		t.Fatalf("read %d functions in %v: the scripts were not found", read, pages)
	}
}
