// Package systemd renders the unit `conch service install` writes: what
// runs `conch up`, where its data and secrets are, and how it stops.
package systemd

import "strings"

// Options is what a unit is written from.
type Options struct {
	User    bool   // a user unit (systemctl --user)
	Exe     string // the conch binary
	Config  string // --config, "" for the default
	DataDir string
	EnvFile string // optional KEY=value file with secrets
	RunAs   string // User= of a system unit; "" for root
}

// Unit renders the systemd unit that runs `conch up`.
func Unit(o Options) string {
	var b strings.Builder
	b.WriteString("# Written by `conch service install`; `conch service uninstall` removes it.\n")
	b.WriteString("[Unit]\n")
	b.WriteString("Description=conch gateway (every conversation gets its own computer)\n")
	b.WriteString("After=network-online.target docker.service podman.socket\n")
	b.WriteString("Wants=network-online.target\n\n")
	b.WriteString("[Service]\n")
	b.WriteString("Type=simple\n")
	exec := Quote(o.Exe)
	if o.Config != "" {
		exec += " --config " + Quote(o.Config)
	}
	b.WriteString("ExecStart=" + exec + " up\n")
	b.WriteString("Environment=" + Quote("CONCH_DATA_DIR="+o.DataDir) + "\n")
	// "-": the file is optional. Secrets (CONCH_MODEL_API_KEY=…) go there,
	// not into the unit, which is world-readable.
	b.WriteString("EnvironmentFile=-" + o.EnvFile + "\n")
	b.WriteString("WorkingDirectory=" + Quote(o.DataDir) + "\n")
	if !o.User && o.RunAs != "" {
		b.WriteString("User=" + o.RunAs + "\n")
	}
	b.WriteString("Restart=on-failure\n")
	b.WriteString("RestartSec=5s\n")
	// conch stops its channels and lets turns end at SIGTERM; turns cut
	// short resume at the next start.
	b.WriteString("KillSignal=SIGTERM\n")
	b.WriteString("TimeoutStopSec=30s\n")
	b.WriteString("NoNewPrivileges=true\n")
	b.WriteString("UMask=0077\n\n")
	b.WriteString("[Install]\n")
	if o.User {
		b.WriteString("WantedBy=default.target\n")
	} else {
		b.WriteString("WantedBy=multi-user.target\n")
	}
	return b.String()
}

// Quote quotes a word for a unit file when it needs it.
func Quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\$%") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", "$$", "%", "%%")
	return `"` + r.Replace(s) + `"`
}
