package conch_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// Layers of the module, lowest first. Arrows point down: a package imports
// the root, leaves and what its entry lists, never a package above it.
type layer int

const (
	layerRoot     layer = iota // conch: domain types and interfaces, stdlib only
	layerLeaf                  // facts and helpers: stdlib, third-party and other leaves
	layerConfig                // config: read by the wiring only
	layerCore                  // the gateway, the agent and their services
	layerConcrete              // adapters: one outside dependency each; take options, never the config
	layerWiring                // cmd/conch: where concrete packages meet
)

func (l layer) String() string {
	return [...]string{"root", "leaf", "config", "core", "concrete", "wiring"}[l]
}

// modulePackages names every non-test package, its layer and the packages
// (besides the root and leaves) it may import directly. A new package gets
// an entry here: the test fails on one it does not know.
var modulePackages = map[string]struct {
	layer layer
	may   []string
}{
	"conch": {layerRoot, nil},

	"conch/npmpin": {layerLeaf, nil},
	"conch/coders": {layerLeaf, nil},
	// Imported by channels only (the channelShared rule below).
	"conch/channel/internal/markdown": {layerLeaf, nil},
	"conch/internal/backoff":          {layerLeaf, nil},
	"conch/internal/binsize":          {layerLeaf, nil}, // what the release binary is made of
	"conch/internal/flock":            {layerLeaf, nil},
	"conch/internal/idletrim":         {layerLeaf, nil}, // idle memory back to the system
	"conch/internal/release/sbom":     {layerLeaf, nil}, // make release: the SBOM of a binary
	"conch/internal/systemd":          {layerLeaf, nil},
	"conch/netpolicy":                 {layerLeaf, nil},
	"conch/llm":                       {layerLeaf, nil},
	"conch/media":                     {layerLeaf, nil},

	"conch/internal/binsize/cmd/binsize": {layerLeaf, nil},

	// make bench / make soak: the table of the performance goals.
	"conch/internal/benchtable":                {layerLeaf, nil},
	"conch/internal/benchtable/cmd/benchtable": {layerLeaf, nil},

	"conch/config": {layerConfig, nil},

	"conch/agent":          {layerCore, nil},
	"conch/gateway":        {layerCore, []string{"conch/agent"}},
	"conch/hook":           {layerCore, nil},
	"conch/skill":          {layerCore, nil},
	"conch/usage":          {layerCore, nil},
	"conch/transcript":     {layerCore, []string{"conch/agent", "conch/usage"}},
	"conch/schedule":       {layerCore, nil},
	"conch/terminal":       {layerCore, nil},
	"conch/terminal/coder": {layerCore, []string{"conch/terminal"}},
	"conch/tool":           {layerCore, []string{"conch/schedule", "conch/skill", "conch/terminal", "conch/terminal/coder"}},

	"conch/channel/cli":          {layerConcrete, nil},
	"conch/channel/discord":      {layerConcrete, nil},
	"conch/channel/slack":        {layerConcrete, nil},
	"conch/channel/email":        {layerConcrete, nil},
	"conch/channel/matrix":       {layerConcrete, nil},
	"conch/channel/telegram":     {layerConcrete, nil},
	"conch/channel/web":          {layerConcrete, nil},
	"conch/llm/anthropic":        {layerConcrete, []string{"conch/llm/internal/convert", "conch/llm/internal/llmerr"}},
	"conch/llm/gemini":           {layerConcrete, []string{"conch/llm/internal/convert", "conch/llm/internal/llmerr"}},
	"conch/llm/openai":           {layerConcrete, []string{"conch/llm/internal/convert", "conch/llm/internal/llmerr"}},
	"conch/llm/internal/convert": {layerConcrete, nil},
	"conch/llm/internal/llmerr":  {layerConcrete, nil},
	"conch/sandbox/docker":       {layerConcrete, []string{"conch/images/sandbox", "conch/sandbox/sandboxd"}},
	"conch/sandbox/kubernetes":   {layerConcrete, []string{"conch/sandbox/sandboxd"}},
	"conch/sandbox/sandboxd":     {layerConcrete, nil},
	"conch/images/sandbox":       {layerConcrete, nil},
	"conch/sqlite":               {layerConcrete, nil},
	"conch/spool":                {layerConcrete, nil},
	"conch/egress":               {layerConcrete, nil},
	"conch/search":               {layerConcrete, nil},
	"conch/obs":                  {layerConcrete, nil},
	"conch/obs/metrics":          {layerConcrete, nil},
	"conch/mcp":                  {layerConcrete, nil},
	"conch/mcpserver":            {layerConcrete, nil},

	"conch/cmd/conch": {layerWiring, nil},
}

// TestImportRules enforces the rules of DESIGN.md on the non-test
// dependencies of every package: the layers of modulePackages, and the
// older rules on core packages, channels and test helpers.
func TestImportRules(t *testing.T) {
	testOnly := []string{"conch/fake", "conch/internal/testenv"}
	isTestOnly := func(path string) bool {
		// Test helper packages are named like sqlitetest, agenttest.
		return under(path, testOnly...) || strings.HasPrefix(path, "conch/") && strings.HasSuffix(path, "test")
	}
	layerOf := func(path string) (layer, bool) {
		e, ok := modulePackages[path]
		return e.layer, ok
	}
	// Concrete packages wrap one dependency each (a channel, a provider, a
	// sandbox backend, the store, the host's disk and network, a search
	// service); core packages reach them only through the root interfaces.
	concrete := []string{"conch/channel", "conch/llm", "conch/sandbox", "conch/sqlite", "conch/spool", "conch/egress"}
	const channelShared = "conch/channel/internal"
	for path, e := range modulePackages {
		if e.layer == layerConcrete {
			concrete = append(concrete, path)
		}
	}
	core := []string{"conch/gateway", "conch/agent", "conch/tool", "conch/terminal", "conch/schedule"}
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		if !isTestOnly(p.ImportPath) {
			seen[p.ImportPath] = true
			l, ok := layerOf(p.ImportPath)
			if !ok {
				t.Errorf("package %s is in no layer: add it to modulePackages in imports_test.go (root, leaf, core, concrete or wiring) with what it may import", p.ImportPath)
				continue
			}
			for _, imp := range p.Imports {
				if !strings.HasPrefix(imp, "conch/") {
					continue
				}
				il, known := layerOf(imp)
				switch {
				case !known:
					// Reported as a package of its own (or test-only, below).
				case l == layerWiring:
				case l == layerLeaf && il != layerLeaf:
					t.Errorf("leaf %s imports %s (%s); leaves import the standard library, outside modules and other leaves only", p.ImportPath, imp, il)
				case il == layerLeaf:
				case il == layerConfig:
					t.Errorf("%s (%s) imports the configuration; only the wiring (cmd/conch) reads it, adapters take options", p.ImportPath, l)
				case !slices.Contains(modulePackages[p.ImportPath].may, imp):
					t.Errorf("%s (%s) imports %s (%s), which modulePackages does not allow it: arrows point down (records the store keeps belong to the root; a consumer declares the interface it needs)", p.ImportPath, l, imp, il)
				}
			}
			for _, d := range p.Deps {
				if dl, ok := layerOf(d); ok && l < layerWiring && dl > l && dl != layerConfig {
					t.Errorf("%s (%s) depends on %s (%s), a higher layer", p.ImportPath, l, d, dl)
				}
				if l == layerConcrete && d == "conch/config" {
					t.Errorf("adapter %s depends on conch/config; adapters take options, not the app's config", p.ImportPath)
				}
			}
		}
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
					t.Errorf("core package %s depends on %s; core packages never import channels, providers, the engine runtime, the store or other adapters", p.ImportPath, d)
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
	for path := range modulePackages {
		if !seen[path] {
			t.Errorf("modulePackages names %s, which go list does not find: remove or rename its entry", path)
		}
	}
}

// TestEnvThroughConfig: every CONCH_* variable is read by config (Load);
// no other non-test code reads one from the environment itself.
func TestEnvThroughConfig(t *testing.T) {
	read := regexp.MustCompile(`(Getenv|LookupEnv)\(\s*"CONCH_`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "config" || path == "internal/testenv" || path == "fake" || strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(filepath.Dir(path), "test") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if loc := read.FindIndex(b); loc != nil {
			t.Errorf("%s reads a CONCH_ variable itself (%s); add it to config and pass the value as an option", path, b[loc[0]:loc[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
