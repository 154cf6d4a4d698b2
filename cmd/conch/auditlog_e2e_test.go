package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"conch/internal/testenv/fakellm"
)

// TestUpHoldsAuditLogFromStart: `conch up` opens the audit log at start,
// before any record, so the open files counted at start (the soak's
// baseline, issue 22 row 11) already include it and the first record opens
// nothing new.
func TestUpHoldsAuditLogFromStart(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/fd")
	}
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := append(testEnv(srv, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN="+freeAddr(t), "CONCH_METRICS_LISTEN="+freeAddr(t))
	p := startConch(t, env, "up")
	p.waitStderr(t, "metrics listening")
	real, err := filepath.EvalSymlinks(dir) // /proc shows resolved paths
	if err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(real, "data", "logs", "audit.jsonl")
	fdDir := filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "fd")
	es, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, e := range es {
		if target, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && target == audit {
			held++
		}
	}
	if held != 1 {
		t.Fatalf("conch up holds %d descriptors on %s before any record, want 1", held, audit)
	}
	if fi, err := os.Stat(audit); err != nil || fi.Size() != 0 {
		t.Fatalf("audit log at start: %v %v (want it empty: nothing was audited)", fi, err)
	}
	p.kill9(t)
}
