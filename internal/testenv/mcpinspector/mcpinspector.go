// Package mcpinspector gives tests a real MCP client from the npm registry:
// the MCP Inspector's command-line client (@modelcontextprotocol/inspector-cli,
// pinned), installed once with the machine's npm into the shared test cache
// and run with its node. Missing node or npm, or a failed install, is
// testenv.Missing.
package mcpinspector

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"conch/internal/flock"
	"conch/internal/testenv"
)

// Package is the pinned client.
const Package = "@modelcontextprotocol/inspector-cli@1.0.3"

// dir is where it is installed, shared by every test run on the machine.
var dir = filepath.Join("/tmp/conch-testenv", "npm", "inspector-cli-1.0.3")

// Inspector runs the client.
type Inspector struct {
	node  string
	entry string
}

// Get installs the client if needed and returns it.
func Get(t *testing.T) *Inspector {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "node is not on PATH (the MCP Inspector CLI runs on it)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		testenv.Missing(t, "npm", "npm is not on PATH (it installs the MCP Inspector CLI)")
	}
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build", "index.js")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err := flock.Lock(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := os.Stat(entry); err != nil {
		cmd := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--ignore-scripts", Package)
		if out, err := cmd.CombinedOutput(); err != nil {
			testenv.Missing(t, "MCP Inspector CLI", "npm install "+Package+": "+err.Error()+"\n"+string(out))
		}
	}
	return &Inspector{node: node, entry: entry}
}

// Run runs the client with args and returns its standard output; a non-zero
// exit is returned as err with standard error in it.
func (i *Inspector) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, i.node, append([]string{i.entry}, args...)...)
	// It finds its own package.json by a path relative to the working
	// directory (../package.json), as when started from its build dir.
	cmd.Dir = filepath.Dir(i.entry)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), &RunError{Err: err, Stderr: errb.String()}
	}
	return out.String(), nil
}

// RunError is a failed run of the client.
type RunError struct {
	Err    error
	Stderr string
}

func (e *RunError) Error() string { return e.Err.Error() + ": " + e.Stderr }
func (e *RunError) Unwrap() error { return e.Err }
