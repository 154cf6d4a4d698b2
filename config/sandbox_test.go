package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSandboxLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "conch.toml")
	if err := os.WriteFile(file, []byte(`
[sandbox]
profile = "coding"
warm_pool = 2
idle_stop = "0s"

[sandbox.profiles.default]
memory = "1g"

[sandbox.profiles.coding]
pids = 512
cpus = 2.5
network = "egress"
read_only_root = false
ulimits = ["nofile=8192:8192"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, []string{"HOME=" + dir, "CONCH_SANDBOX_RETENTION=48h"})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox
	if got := s.IdleStopD(); got != 0 {
		t.Errorf("idle_stop: got %s, want 0 (explicitly never)", got)
	}
	if got := s.RetentionD(); got != 48*time.Hour {
		t.Errorf("retention: got %s, want 48h from the environment", got)
	}
	if s.WarmPool != 2 || s.ProfileName() != "coding" {
		t.Errorf("got warm_pool %d profile %q, want 2 coding", s.WarmPool, s.ProfileName())
	}
	p, err := s.ActiveProfile()
	if err != nil {
		t.Fatal(err)
	}
	if p.Memory != "1g" || *p.Pids != 512 || *p.CPUs != 2.5 || p.Network != "egress" || *p.ReadOnlyRoot || p.Ulimits[0] != "nofile=8192:8192" {
		t.Errorf("active profile: got %+v, want default's memory merged with coding's settings", p)
	}
	if p.Init != nil || p.User != "" {
		t.Errorf("unset fields: got init %v user %q, want them left to the built-in default", p.Init, p.User)
	}
	if ps := s.validate(); len(ps) != 0 {
		t.Errorf("validate: got %v, want none", ps)
	}

	c, err = Load("", []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Sandbox.IdleStopD(), DefaultSandboxIdleStop; got != want {
		t.Errorf("default idle_stop: got %s, want %s", got, want)
	}
	if got, want := c.Sandbox.RetentionD(), DefaultSandboxRetention; got != want {
		t.Errorf("default retention: got %s, want %s", got, want)
	}
	if p, err := c.Sandbox.ActiveProfile(); err != nil || p.Memory != "" {
		t.Errorf("default profile: got %+v, %v; want no overrides", p, err)
	}
}

func TestSandboxValidate(t *testing.T) {
	d := func(s string) *Duration { v, _ := time.ParseDuration(s); x := Duration(v); return &x }
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	base := SandboxConfig{Engine: "auto", Image: "conch-sandbox:latest"}
	tests := []struct {
		name    string
		change  func(*SandboxConfig)
		wantKey string // "" means valid
	}{
		{"defaults", func(*SandboxConfig) {}, ""},
		{"none skips the rest", func(s *SandboxConfig) { s.Engine, s.WarmPool = "none", -1 }, ""},
		{"bad engine", func(s *SandboxConfig) { s.Engine = "lxc" }, "sandbox.engine"},
		{"bad transport", func(s *SandboxConfig) { s.Transport = "tcp" }, "sandbox.transport"},
		{"missing sandboxd binary", func(s *SandboxConfig) { s.SandboxdBinary = "/nonexistent/conch" }, "sandbox.sandboxd_binary"},
		{"missing sandboxd binary by its old name", func(s *SandboxConfig) { s.AgentBinary = "/nonexistent/conch" }, "sandbox.agent_binary"},
		{"negative idle stop", func(s *SandboxConfig) { s.IdleStop = d("-1m") }, "sandbox.idle_stop"},
		{"retention shorter than idle stop", func(s *SandboxConfig) { s.IdleStop, s.Retention = d("1h"), d("10m") }, "sandbox.retention"},
		{"retention off", func(s *SandboxConfig) { s.Retention = d("0s") }, ""},
		{"warm pool too big", func(s *SandboxConfig) { s.WarmPool = 1000 }, "sandbox.warm_pool"},
		{"unknown profile", func(s *SandboxConfig) { s.Profile = "nope" }, "sandbox.profile"},
		{"negative pids", func(s *SandboxConfig) { s.Profiles = map[string]SandboxProfile{"default": {Pids: i64(-1)}} }, "sandbox.profiles.default.pids"},
		{"negative cpus", func(s *SandboxConfig) { s.Profiles = map[string]SandboxProfile{"x": {CPUs: f64(-1)}} }, "sandbox.profiles.x.cpus"},
		{"bad memory", func(s *SandboxConfig) { s.Profiles = map[string]SandboxProfile{"x": {Memory: "lots"}} }, "sandbox.profiles.x.memory"},
		{"tiny memory", func(s *SandboxConfig) { s.Profiles = map[string]SandboxProfile{"x": {Memory: "1m"}} }, "sandbox.profiles.x.memory"},
		{"no memory limit", func(s *SandboxConfig) { s.Profiles = map[string]SandboxProfile{"x": {Memory: "0"}} }, ""},
		{"bad tmp size", func(s *SandboxConfig) { s.Profiles = map[string]SandboxProfile{"x": {TmpSize: "-3"}} }, "sandbox.profiles.x.tmp_size"},
		{"host network", func(s *SandboxConfig) { s.Profiles = map[string]SandboxProfile{"x": {Network: "host"}} }, "sandbox.profiles.x.network"},
		{"root user", func(s *SandboxConfig) { s.Profiles = map[string]SandboxProfile{"x": {User: "0:0"}} }, "sandbox.profiles.x.user"},
		{"named user", func(s *SandboxConfig) { s.Profiles = map[string]SandboxProfile{"x": {User: "conch"}} }, "sandbox.profiles.x.user"},
		{"bad ulimit", func(s *SandboxConfig) { s.Profiles = map[string]SandboxProfile{"x": {Ulimits: []string{"nofile=9:1"}}} }, "sandbox.profiles.x.ulimits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.change(&s)
			ps := s.validate()
			switch {
			case tt.wantKey == "" && len(ps) > 0:
				t.Errorf("got %v, want no problems", ps)
			case tt.wantKey != "" && (len(ps) != 1 || ps[0].Key != tt.wantKey || ps[0].Fix == ""):
				t.Errorf("got %v, want one problem on %s with a fix", ps, tt.wantKey)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"512MiB", 512 << 20, false}, {"1g", 1 << 30, false}, {"256m", 256 << 20, false}, {"0", 0, false},
		{"1.5GiB", 3 << 29, false}, {"4096", 4096, false}, {"64 KiB", 64 << 10, false},
		{"", 0, true}, {"lots", 0, true}, {"5 parsecs", 0, true}, {"-1m", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseSize(%q): got %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil && !strings.Contains(err.Error(), "512MiB") {
			t.Errorf("ParseSize(%q) error %q does not show an example", tt.in, err)
		}
	}
}

func TestSandboxDiskAuto(t *testing.T) {
	for _, tc := range []struct {
		v    string
		auto bool
		n    int64
	}{{"", true, 2 << 30}, {"auto", true, 2 << 30}, {"0", false, 0}, {"512MiB", false, 512 << 20}} {
		s := SandboxConfig{Disk: tc.v}
		n, err := s.DiskBytes()
		if err != nil || n != tc.n || s.DiskAuto() != tc.auto {
			t.Errorf("disk %q: got %d auto=%v (%v), want %d auto=%v", tc.v, n, s.DiskAuto(), err, tc.n, tc.auto)
		}
	}
}

// TestCoderSandbox: a coding agent gets more memory and processes unless
// the configured profile says otherwise.
func TestCoderSandbox(t *testing.T) {
	c := &Config{}
	if p, err := c.SandboxProfile(); err != nil || p.Memory != "" || p.Pids != nil {
		t.Fatalf("no coder: got %+v, %v; want the defaults", p, err)
	}
	c.Coder.Agent = "claude"
	if p, err := c.SandboxProfile(); err != nil || p.Memory != "2g" || p.Pids == nil || *p.Pids != 1024 {
		t.Fatalf("coder: got %+v, %v; want 2g and 1024 processes", p, err)
	}
	c.Sandbox.Profiles = map[string]SandboxProfile{DefaultSandboxProfile: {Memory: "4g"}}
	if p, err := c.SandboxProfile(); err != nil || p.Memory != "4g" || *p.Pids != 1024 {
		t.Fatalf("coder with a profile: got %+v, %v; want the profile's 4g", p, err)
	}
}

// TestCoderApprovals: ask and person modes are refused for Codex, which cannot ask in
// conch's sandbox, with the key and the way out named.
func TestCoderApprovals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		agent, approvals, wantErr string
	}{
		{"codex", "auto", ""},
		{"claude", "ask", ""},
		{"gemini", "ask", ""},
		{"codex", "ask", "coder.approvals: Codex cannot ask"},
		{"claude", "person", ""},
		{"codex", "person", "coder.approvals: Codex cannot ask"},
		{"claude", "sometimes", `coder.approvals: unknown approval mode "sometimes"`},
	} {
		c, err := Load("", []string{"XDG_CONFIG_HOME=" + dir, "HOME=" + dir, "CONCH_MODEL_PROVIDER=openai", "CONCH_MODEL=gpt-test", "CONCH_MODEL_API_KEY=k",
			"CONCH_CODER_AGENT=" + tc.agent, "CONCH_CODER_API_KEY=k", "CONCH_CODER_APPROVALS=" + tc.approvals})
		if err == nil {
			err = c.Validate()
		}
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s/%s: %v", tc.agent, tc.approvals, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s/%s: got %v, want an error with %q", tc.agent, tc.approvals, err, tc.wantErr)
		}
	}
}

// sandbox.agent_binary is the old name of sandbox.sandboxd_binary: still
// read, with a deprecation warning; the new key wins.
func TestSandboxdBinaryOldName(t *testing.T) {
	var c Config
	c.Sandbox.AgentBinary = "/old/conch"
	if bin, key := c.Sandbox.Sandboxd(); bin != "/old/conch" || key != "sandbox.agent_binary" {
		t.Fatalf("old name: %q from %s", bin, key)
	}
	if d := c.Deprecations(); len(d) != 1 || !strings.Contains(d[0], "sandbox.sandboxd_binary") {
		t.Fatalf("deprecations %q", d)
	}
	c.Sandbox.SandboxdBinary = "/new/conch"
	if bin, _ := c.Sandbox.Sandboxd(); bin != "/new/conch" || len(c.Deprecations()) != 0 {
		t.Fatalf("the new key must win without a warning: %q %q", bin, c.Deprecations())
	}
}
