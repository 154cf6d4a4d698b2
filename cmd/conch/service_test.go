package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServiceInstallStatusUninstall(t *testing.T) {
	dir := t.TempDir()
	unit := filepath.Join(dir, "systemd", "user", "conch.service")
	var calls []string
	sysctl := func(_ context.Context, args ...string) ([]byte, error) {
		calls = append(calls, strings.Join(args, " "))
		return []byte("● conch.service - active (running)\n"), nil
	}
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "cfg"))
	t.Setenv("CONCH_DATA_DIR", filepath.Join(dir, "data"))
	t.Setenv("CONCH_MODEL", "m")
	t.Setenv("CONCH_MODEL_API_KEY", "k")
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		a := &app{stdout: &out, stderr: &errb}
		root := newRootCmd(nil, &out, &errb)
		for i, c := range root.Commands() {
			if c.Name() == "service" {
				root.RemoveCommand(root.Commands()[i])
				break
			}
		}
		root.AddCommand(a.serviceCmdWith(sysctl, func(bool) (string, error) { return unit, nil }))
		root.SetArgs(args)
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	out, err := run("service", "install", "--user")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "CONCH_DATA_DIR="+filepath.Join(dir, "data")) || !strings.Contains(string(b), "EnvironmentFile=-"+filepath.Join(dir, "cfg", "conch", "conch.env")) {
		t.Errorf("unit:\n%s", b)
	}
	if got := strings.Join(calls, "; "); got != "--user daemon-reload; --user enable --now conch.service" {
		t.Errorf("systemctl calls: %s", got)
	}
	if !strings.Contains(out, "loginctl enable-linger") {
		t.Errorf("a user install should mention lingering: %s", out)
	}
	calls = nil
	if out, err = run("service", "status", "--user"); err != nil || !strings.Contains(out, "active (running)") {
		t.Errorf("status: %v %s", err, out)
	}
	calls = nil
	if out, err = run("service", "uninstall", "--user"); err != nil {
		t.Fatalf("uninstall: %v %s", err, out)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Errorf("unit still there: %v", err)
	}
	if got := strings.Join(calls, "; "); got != "--user disable --now conch.service; --user daemon-reload" {
		t.Errorf("systemctl calls: %s", got)
	}
	if _, err = run("service", "status", "--user"); err == nil || !strings.Contains(err.Error(), "no conch service is installed") {
		t.Errorf("status without a unit: %v", err)
	}
}
