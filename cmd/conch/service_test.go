package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServiceUnitText(t *testing.T) {
	sys := serviceUnit(serviceOptions{Exe: "/usr/local/bin/conch", Config: "/etc/conch/conch.toml", DataDir: "/var/lib/conch", EnvFile: "/etc/conch/conch.env", RunAs: "conch"})
	for _, want := range []string{
		"ExecStart=/usr/local/bin/conch --config /etc/conch/conch.toml up\n",
		"Restart=on-failure\n",
		"Environment=CONCH_DATA_DIR=/var/lib/conch\n",
		"EnvironmentFile=-/etc/conch/conch.env\n",
		"WorkingDirectory=/var/lib/conch\n",
		"User=conch\n",
		"After=network-online.target docker.service podman.socket\n",
		"WantedBy=multi-user.target\n",
	} {
		if !strings.Contains(sys, want) {
			t.Errorf("system unit lacks %q:\n%s", want, sys)
		}
	}
	user := serviceUnit(serviceOptions{User: true, Exe: "/home/me/my bin/conch", DataDir: "/home/me/.local/share/conch", EnvFile: "/home/me/.config/conch/conch.env", RunAs: "me"})
	for _, want := range []string{`ExecStart="/home/me/my bin/conch" up` + "\n", "WantedBy=default.target\n"} {
		if !strings.Contains(user, want) {
			t.Errorf("user unit lacks %q:\n%s", want, user)
		}
	}
	if strings.Contains(user, "User=") {
		t.Errorf("a user unit must not set User=:\n%s", user)
	}
	if got := systemdQuote(`100%$"x`); got != `"100%%$$\"x"` {
		t.Errorf("quote: %s", got)
	}
}

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
