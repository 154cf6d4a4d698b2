package conch_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// pkg is the part of `go list -json` the rules need.
type pkg struct {
	ImportPath string
	Deps       []string
	Imports    []string
	Standard   bool
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "goolm", "-json=ImportPath,Deps,Imports,Standard", "./...")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func under(path string, prefixes ...string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// TestImportRules enforces the rules of DESIGN.md on the non-test
// dependencies of every package.
func TestImportRules(t *testing.T) {
	testOnly := []string{"conch/fake", "conch/internal/testenv"}
	isTestOnly := func(path string) bool {
		// Test helper packages are named like sqlitetest, agenttest.
		return under(path, testOnly...) || strings.HasPrefix(path, "conch/") && strings.HasSuffix(path, "test")
	}
	// Concrete packages wrap one dependency each (a channel, a provider, a
	// sandbox backend, the store, the host's disk and network); core
	// packages reach them only through the root interfaces.
	concrete := []string{"conch/channel", "conch/llm", "conch/sandbox", "conch/sqlite", "conch/spool", "conch/egress"}
	core := []string{"conch/gateway", "conch/agent", "conch/tool", "conch/terminal"}
	const channelShared = "conch/channel/internal"
	for _, p := range listPackages(t) {
		switch {
		case p.ImportPath == "conch":
			for _, imp := range p.Imports {
				if strings.Contains(strings.Split(imp, "/")[0], ".") || strings.HasPrefix(imp, "conch") {
					t.Errorf("the root package imports %s; it may import the standard library only", imp)
				}
			}
		case under(p.ImportPath, core...) && !isTestOnly(p.ImportPath):
			for _, d := range p.Deps {
				if under(d, concrete...) {
					t.Errorf("core package %s depends on %s; core packages never import channels, providers, the engine runtime or the store", p.ImportPath, d)
				}
			}
		case under(p.ImportPath, "conch/channel"):
			own := strings.Join(strings.Split(p.ImportPath, "/")[:3], "/")
			for _, d := range p.Deps {
				// channel/internal is the machinery channels share
				// (Markdown rendering and splitting); it imports no channel.
				if under(d, "conch/channel") && !under(d, own) && !under(d, channelShared) {
					t.Errorf("channel %s depends on channel %s; channels never import each other", p.ImportPath, d)
				}
				// A channel talks to the gateway through conch.Handler
				// (admission, submission) and conch.EventSource only.
				if under(d, "conch/gateway", "conch/agent", "conch/sqlite", "conch/sandbox") {
					t.Errorf("channel %s depends on %s; channels see the gateway only through the root interfaces", p.ImportPath, d)
				}
			}
		}
		if !under(p.ImportPath, "conch/channel") && slices.ContainsFunc(p.Imports, func(d string) bool { return under(d, channelShared) }) {
			t.Errorf("%s imports %s; only channels share it", p.ImportPath, channelShared)
		}
		if !isTestOnly(p.ImportPath) {
			for _, d := range p.Deps {
				if isTestOnly(d) {
					t.Errorf("%s depends on test-only package %s", p.ImportPath, d)
				}
			}
		}
		if slices.Contains(p.Deps, "runtime/cgo") {
			t.Errorf("%s needs cgo; conch is built with CGO_ENABLED=0", p.ImportPath)
		}
	}
}
