package config

import (
	"fmt"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SandboxConfig configures the container runtime. Owned by the sandbox package's authors.
//
// Keys left out of the file take the documented defaults (pointer fields
// tell "absent" from an explicit zero).
type SandboxConfig struct {
	// Engine is auto | docker | podman | none.
	Engine string `toml:"engine" env:"ENGINE"`
	// Host is the engine's API address (unix:///run/docker.sock); "" means auto-detect.
	Host  string `toml:"host" env:"HOST"`
	Image string `toml:"image" env:"IMAGE"`
	// SandboxdBinary is a static conch binary bind-mounted read-only into
	// every sandbox and run there as sandboxd (`conch sandbox-agent`); ""
	// means this executable when it is static.
	SandboxdBinary string `toml:"sandboxd_binary" env:"SANDBOXD_BINARY"`
	// AgentBinary is the old name of SandboxdBinary, still read (with a
	// deprecation warning) when SandboxdBinary is not set.
	AgentBinary string `toml:"agent_binary" env:"AGENT_BINARY"`
	// Profile names the hardening profile in use; "" means "default".
	Profile string `toml:"profile" env:"PROFILE"`
	// Profiles override the built-in hardening: [sandbox.profiles.<name>].
	// A profile starts from the default one and changes what it sets;
	// [sandbox.profiles.default] changes the default itself.
	Profiles map[string]SandboxProfile `toml:"profiles" env:"-"`
	// IdleStop stops a sandbox unused this long (its workspace stays, it
	// restarts on next use); default 30m, "0s" never.
	IdleStop *Duration `toml:"idle_stop" env:"IDLE_STOP"`
	// Retention removes the container of a sandbox unused this long (the
	// workspace stays until the conversation is removed); default 168h,
	// "0s" never.
	Retention *Duration `toml:"retention" env:"RETENTION"`
	// WarmPool keeps this many started containers ready for new
	// conversations; default 0.
	WarmPool int `toml:"warm_pool" env:"WARM_POOL"`
	// Mirror is the Debian mirror of the offline image build; "" means the
	// host's apt mirror.
	Mirror string `toml:"mirror" env:"MIRROR"`
	// NPMRegistry is the npm registry the pinned packages of derived images
	// (the coding CLIs) are downloaded from; also CONCH_NPM_REGISTRY.
	NPMRegistry string `toml:"npm_registry" env:"NPM_REGISTRY"`
	// CacheDir keeps the offline image build; "" means <data_dir>/cache.
	CacheDir string `toml:"cache_dir" env:"CACHE_DIR"`
	// Disk is each workspace's size limit, sizes as for memory ("2g",
	// "512MiB"), "0" for no limit, or "auto" (also ""): DefaultSandboxDisk
	// where the engine can enforce it, else no limit with a warning. An
	// explicit size that the engine cannot enforce stops conch at start
	// (fail closed).
	Disk string `toml:"disk" env:"DISK"`
	// Backend is "engine" (Docker or Podman, the default) or "kubernetes"
	// (a pod per conversation, [sandbox.kubernetes]; kubernetes.go).
	Backend string `toml:"backend" env:"BACKEND"`
	// Transport is how conch reaches each sandbox's agent on Docker and
	// Podman: auto | socket | exec (sandbox/docker/transport.go).
	Transport  string           `toml:"transport" env:"TRANSPORT"`
	Kubernetes KubernetesConfig `toml:"kubernetes" envPrefix:"KUBERNETES_"`
}

// Sandbox defaults for keys left out.
const (
	DefaultSandboxIdleStop  = 30 * time.Minute
	DefaultSandboxRetention = 7 * 24 * time.Hour
	DefaultSandboxProfile   = "default"
	DefaultSandboxDisk      = "2g"
	maxWarmPool             = 64
)

// IdleStopD returns sandbox.idle_stop or its default; 0 means never.
func (s SandboxConfig) IdleStopD() time.Duration {
	if s.IdleStop == nil {
		return DefaultSandboxIdleStop
	}
	return s.IdleStop.D()
}

// RetentionD returns sandbox.retention or its default; 0 means never.
func (s SandboxConfig) RetentionD() time.Duration {
	if s.Retention == nil {
		return DefaultSandboxRetention
	}
	return s.Retention.D()
}

// DiskAuto reports whether sandbox.disk is "auto" (or unset): the default
// quota where the engine can enforce one, none (with a warning) elsewhere.
func (s SandboxConfig) DiskAuto() bool { return s.Disk == "" || s.Disk == "auto" }

// DiskBytes returns sandbox.disk in bytes (the default for "auto"); 0 means
// no limit.
func (s SandboxConfig) DiskBytes() (int64, error) {
	d := s.Disk
	if s.DiskAuto() {
		d = DefaultSandboxDisk
	}
	n, err := ParseSize(d)
	if err != nil {
		return 0, fmt.Errorf("sandbox.disk: %w", err)
	}
	return n, nil
}

// ProfileName returns the selected profile's name.
func (s SandboxConfig) ProfileName() string {
	if s.Profile == "" {
		return DefaultSandboxProfile
	}
	return s.Profile
}

// ActiveProfile returns the selected profile's overrides: those of
// [sandbox.profiles.default] first, then the selected profile's.
func (s SandboxConfig) ActiveProfile() (SandboxProfile, error) {
	name := s.ProfileName()
	p, ok := s.Profiles[name]
	if !ok && name != DefaultSandboxProfile {
		return SandboxProfile{}, fmt.Errorf("sandbox.profile: no profile %q", name)
	}
	if name == DefaultSandboxProfile {
		return p, nil
	}
	return s.Profiles[DefaultSandboxProfile].Merge(p), nil
}

// CoderSandbox is what a sandbox needs besides the defaults when a coding
// agent runs in it: a CLI with its language server, tools and child
// processes outgrows 512 MiB and 128 processes (threads count). A
// configured profile's own values win.
func CoderSandbox() SandboxProfile {
	pids := int64(1024)
	return SandboxProfile{Memory: "2g", Pids: &pids}
}

// SandboxProfile returns the hardening overrides sandboxes get: the active
// profile, on top of CoderSandbox when a coding agent is configured.
func (c *Config) SandboxProfile() (SandboxProfile, error) {
	p, err := c.Sandbox.ActiveProfile()
	if err != nil || c.Coder.Agent == "" {
		return p, err
	}
	return CoderSandbox().Merge(p), nil
}

// SandboxProfile changes hardening settings; fields left out keep the
// default (read-only root, 256 MiB tmpfs /tmp, cap_drop ALL,
// no-new-privileges, init, 128 processes, 1 CPU, 512 MiB, uid 1000,
// network none, nofile 4096).
type SandboxProfile struct {
	ReadOnlyRoot    *bool    `toml:"read_only_root"`
	NoNewPrivileges *bool    `toml:"no_new_privileges"`
	Init            *bool    `toml:"init"`
	CapDrop         []string `toml:"cap_drop"`
	CapAdd          []string `toml:"cap_add"`
	// Pids caps processes; 0 means no limit.
	Pids *int64 `toml:"pids"`
	// CPUs caps CPU time (1.5 = one and a half CPUs); 0 means no limit.
	CPUs *float64 `toml:"cpus"`
	// Memory caps memory, swap included: "512MiB", "1g"; "0" means no limit.
	Memory string `toml:"memory"`
	// TmpSize sizes the tmpfs at /tmp: "256MiB"; "0" means no tmpfs.
	TmpSize string `toml:"tmp_size"`
	// User is uid[:gid].
	User string `toml:"user"`
	// Network is none or the name of a network (an egress proxy's); never host.
	Network string `toml:"network"`
	// Ulimits are name=soft:hard, e.g. "nofile=4096:4096".
	Ulimits []string `toml:"ulimits"`
}

// Merge returns p with every field o sets taking o's value.
func (p SandboxProfile) Merge(o SandboxProfile) SandboxProfile {
	if o.ReadOnlyRoot != nil {
		p.ReadOnlyRoot = o.ReadOnlyRoot
	}
	if o.NoNewPrivileges != nil {
		p.NoNewPrivileges = o.NoNewPrivileges
	}
	if o.Init != nil {
		p.Init = o.Init
	}
	if o.CapDrop != nil {
		p.CapDrop = o.CapDrop
	}
	if o.CapAdd != nil {
		p.CapAdd = o.CapAdd
	}
	if o.Pids != nil {
		p.Pids = o.Pids
	}
	if o.CPUs != nil {
		p.CPUs = o.CPUs
	}
	if o.Memory != "" {
		p.Memory = o.Memory
	}
	if o.TmpSize != "" {
		p.TmpSize = o.TmpSize
	}
	if o.User != "" {
		p.User = o.User
	}
	if o.Network != "" {
		p.Network = o.Network
	}
	if o.Ulimits != nil {
		p.Ulimits = o.Ulimits
	}
	return p
}

// ParseSize parses a byte size: a number with an optional unit, binary
// (KiB, MiB, GiB) or the engines' shorthand (k, m, g, also meaning 1024s).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
		"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || v < 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional unit, like 512MiB or 1g", s)
	}
	return int64(v * mult), nil
}

func (s SandboxConfig) validate() []Problem {
	var ps []Problem
	add := func(key, msg, fix string) { ps = append(ps, Problem{Key: key, Msg: msg, Fix: fix}) }
	switch s.Engine {
	case "auto", "docker", "podman", "none":
	default:
		add("sandbox.engine", "unknown engine "+s.Engine, "use auto, docker, podman or none")
	}
	if s.Engine == "none" {
		return ps
	}
	ps = append(ps, s.validateBackend()...)
	switch s.Transport {
	case "", "auto", "socket", "exec":
	default:
		add("sandbox.transport", "unknown transport "+s.Transport, "use auto (a unix socket when the engine runs on this machine), socket or exec")
	}
	if bin, key := s.Sandboxd(); bin != "" {
		if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
			add(key, fmt.Sprintf("%s is not a file", bin), "point it at a conch binary built with CGO_ENABLED=0, or remove the key")
		}
	}
	if u, err := url.Parse(s.NPMRegistry); s.NPMRegistry != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		add("sandbox.npm_registry", fmt.Sprintf("%q is not an http(s) URL", s.NPMRegistry), "set the registry's base URL (CONCH_NPM_REGISTRY), e.g. https://registry.npmjs.org")
	}
	if s.IdleStopD() < 0 {
		add("sandbox.idle_stop", "must not be negative", `use a duration like "30m", or "0s" to never stop`)
	}
	if s.RetentionD() < 0 {
		add("sandbox.retention", "must not be negative", `use a duration like "168h", or "0s" to keep containers`)
	}
	if r, i := s.RetentionD(), s.IdleStopD(); r > 0 && i > 0 && r < i {
		add("sandbox.retention", fmt.Sprintf("%s is shorter than sandbox.idle_stop %s", r, i), "make the retention at least as long as the idle stop")
	}
	if n, err := s.DiskBytes(); err != nil {
		add("sandbox.disk", err.Error(), `use a size like "2g" or "512MiB", "0" for no limit, or "auto"`)
	} else if n > 0 && n < 16<<20 {
		add("sandbox.disk", fmt.Sprintf("%s is below the minimum of 16MiB", s.Disk), `use a size like "2g", or "0" for no limit`)
	}
	if s.WarmPool < 0 || s.WarmPool > maxWarmPool {
		add("sandbox.warm_pool", fmt.Sprintf("%d is out of range", s.WarmPool), fmt.Sprintf("use 0 to %d", maxWarmPool))
	}
	if _, ok := s.Profiles[s.ProfileName()]; !ok && s.ProfileName() != DefaultSandboxProfile {
		names := make([]string, 0, len(s.Profiles))
		for n := range s.Profiles {
			names = append(names, n)
		}
		sort.Strings(names)
		add("sandbox.profile", fmt.Sprintf("no profile %q", s.Profile),
			fmt.Sprintf("define [sandbox.profiles.%s] or use one of: default %s", s.Profile, strings.Join(names, " ")))
	}
	names := make([]string, 0, len(s.Profiles))
	for n := range s.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ps = append(ps, s.Profiles[n].validate("sandbox.profiles."+n)...)
	}
	return ps
}

func (p SandboxProfile) validate(prefix string) []Problem {
	var ps []Problem
	add := func(key, msg, fix string) { ps = append(ps, Problem{Key: prefix + "." + key, Msg: msg, Fix: fix}) }
	if p.Pids != nil && *p.Pids < 0 {
		add("pids", "must not be negative", "use a positive number, or 0 for no limit")
	}
	if p.CPUs != nil && *p.CPUs < 0 {
		add("cpus", "must not be negative", "use e.g. 1 or 0.5, or 0 for no limit")
	}
	if p.Memory != "" {
		if n, err := ParseSize(p.Memory); err != nil {
			add("memory", err.Error(), `use e.g. "512MiB" or "1g", or "0" for no limit`)
		} else if n != 0 && n < 6<<20 {
			add("memory", "below the engines' minimum of 6 MiB", `use e.g. "512MiB"`)
		}
	}
	if p.TmpSize != "" {
		if _, err := ParseSize(p.TmpSize); err != nil {
			add("tmp_size", err.Error(), `use e.g. "256MiB", or "0" for no tmpfs`)
		}
	}
	if p.Network == "host" {
		add("network", "host would give the sandbox the host's network", "use none, or a network behind an egress proxy")
	}
	if p.User != "" && !validUser(p.User) {
		add("user", fmt.Sprintf("%q is not uid[:gid]", p.User), `use e.g. "1000:1000"`)
	}
	if p.User != "" && strings.SplitN(p.User, ":", 2)[0] == "0" {
		add("user", "root inside the sandbox", `use an unprivileged uid, e.g. "1000:1000"`)
	}
	for _, u := range p.Ulimits {
		if !validUlimit(u) {
			add("ulimits", fmt.Sprintf("%q is not name=soft:hard", u), `use e.g. "nofile=4096:4096"`)
		}
	}
	return ps
}

func validUser(u string) bool {
	for _, part := range strings.SplitN(u, ":", 2) {
		if _, err := strconv.ParseUint(part, 10, 32); err != nil {
			return false
		}
	}
	return true
}

func validUlimit(s string) bool {
	name, lim, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	soft, hard, ok := strings.Cut(lim, ":")
	if !ok {
		hard = soft
	}
	sv, err1 := strconv.ParseInt(soft, 10, 64)
	hv, err2 := strconv.ParseInt(hard, 10, 64)
	return err1 == nil && err2 == nil && sv <= hv
}

// Sandboxd returns the sandboxd binary configured and the key it came from:
// sandbox.sandboxd_binary, or its old name sandbox.agent_binary.
func (s SandboxConfig) Sandboxd() (bin, key string) {
	if s.SandboxdBinary != "" || s.AgentBinary == "" {
		return s.SandboxdBinary, "sandbox.sandboxd_binary"
	}
	return s.AgentBinary, "sandbox.agent_binary"
}
