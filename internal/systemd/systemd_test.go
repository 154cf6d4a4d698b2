package systemd

import (
	"strings"
	"testing"
)

func TestUnitText(t *testing.T) {
	sys := Unit(Options{Exe: "/usr/local/bin/conch", Config: "/etc/conch/conch.toml", DataDir: "/var/lib/conch", EnvFile: "/etc/conch/conch.env", RunAs: "conch"})
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
	user := Unit(Options{User: true, Exe: "/home/me/my bin/conch", DataDir: "/home/me/.local/share/conch", EnvFile: "/home/me/.config/conch/conch.env", RunAs: "me"})
	for _, want := range []string{`ExecStart="/home/me/my bin/conch" up` + "\n", "WantedBy=default.target\n"} {
		if !strings.Contains(user, want) {
			t.Errorf("user unit lacks %q:\n%s", want, user)
		}
	}
	if strings.Contains(user, "User=") {
		t.Errorf("a user unit must not set User=:\n%s", user)
	}
	if got := Quote(`100%$"x`); got != `"100%%$$\"x"` {
		t.Errorf("quote: %s", got)
	}
}
