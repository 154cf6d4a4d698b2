package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
)

// Hardening is a sandbox profile: how a conversation's container is confined.
// DefaultHardening is the seed's set; every field can be changed per profile
// in the config.
type Hardening struct {
	// ReadOnlyRoot mounts the image read-only; /tmp and the workspace stay writable.
	ReadOnlyRoot bool
	// TmpSize is the size of the tmpfs at /tmp in bytes; 0 means no tmpfs.
	TmpSize int64
	// CapDrop and CapAdd change the capability set; ["ALL"] drops everything.
	CapDrop, CapAdd []string
	// NoNewPrivileges stops setuid binaries from gaining privileges.
	NoNewPrivileges bool
	// Seccomp gives the container conch's seccomp profile (Docker's default
	// profile, the same on both engines; see seccomp.go) instead of the
	// engine's own default.
	Seccomp bool
	// Init runs an init process as pid 1 that reaps orphans.
	Init bool
	// Pids caps the number of processes; 0 means no limit.
	Pids int64
	// NanoCPUs caps CPU time in billionths of a CPU; 0 means no limit.
	NanoCPUs int64
	// Memory caps memory in bytes (swap included); 0 means no limit.
	Memory int64
	// User runs the tools (every exec, the sandboxd) as uid[:gid].
	User string
	// InitUser runs the container's init and main process as uid[:gid]; ""
	// means User. A different user from User keeps init out of the tools'
	// reach: with no capabilities they can neither ptrace nor signal it,
	// and the agent can end every tool process (kill(-1)) without ending
	// the container.
	InitUser string
	// Network is the network mode: none, or a network name for profiles
	// that need one (an egress proxy network, never host).
	Network string
	// Ulimits are resource limits as name=soft:hard ("nofile=4096:4096").
	Ulimits []string
}

// DefaultHardening is the default profile (seed 002): read-only root, tmpfs
// /tmp, no capabilities, no-new-privileges, conch's seccomp profile, init, 128 processes, 1 CPU,
// 512 MiB, tools as uid 1000 and init as uid 1001, no network.
func DefaultHardening() Hardening {
	return Hardening{
		ReadOnlyRoot:    true,
		TmpSize:         256 << 20,
		CapDrop:         []string{"ALL"},
		NoNewPrivileges: true,
		Seccomp:         true,
		Init:            true,
		Pids:            128,
		NanoCPUs:        1e9,
		Memory:          512 << 20,
		User:            "1000:1000",
		InitUser:        "1001:1001",
		Network:         "none",
		Ulimits:         []string{"nofile=4096:4096"},
	}
}

// podmanUlimits are added for Podman when the profile sets none of them: on
// hosts where raising rlimits is not permitted, Podman's defaults (taken
// from its own, often raised, limits) make the container fail to start.
var podmanUlimits = []string{"nofile=4096:4096", "nproc=1024:1024"}

// Validate reports a profile that cannot be applied.
func (h Hardening) Validate() error {
	if h.Pids < 0 || h.NanoCPUs < 0 || h.Memory < 0 || h.TmpSize < 0 {
		return fmt.Errorf("hardening: negative limit")
	}
	if h.Memory != 0 && h.Memory < 6<<20 {
		return fmt.Errorf("hardening: memory %d bytes is below the engines' minimum of 6 MiB", h.Memory)
	}
	if h.Network == "host" {
		return fmt.Errorf("hardening: network host would share the host's network; use an egress proxy network")
	}
	for _, u := range h.Ulimits {
		if _, err := parseUlimit(u); err != nil {
			return fmt.Errorf("hardening: %w", err)
		}
	}
	return nil
}

// Hash identifies the profile; containers carry it in LabelProfileHash.
func (h Hardening) Hash() string {
	b, _ := json.Marshal(h)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])[:12]
}

func parseUlimit(s string) (*container.Ulimit, error) {
	name, lim, ok := strings.Cut(s, "=")
	soft, hard, ok2 := strings.Cut(lim, ":")
	if !ok || name == "" {
		return nil, fmt.Errorf("ulimit %q: want name=soft:hard", s)
	}
	if !ok2 {
		hard = soft
	}
	sv, err1 := strconv.ParseInt(soft, 10, 64)
	hv, err2 := strconv.ParseInt(hard, 10, 64)
	if err1 != nil || err2 != nil || sv > hv {
		return nil, fmt.Errorf("ulimit %q: want name=soft:hard with soft <= hard", s)
	}
	return &container.Ulimit{Name: name, Soft: sv, Hard: hv}, nil
}

// hostConfig renders the profile for the engine; engine-specific needs are
// added here (see podmanUlimits). seccomp is the SecurityOpt that carries
// the seccomp profile on this engine (seccompOpt), used when h.Seccomp.
func (h Hardening) hostConfig(engine, seccomp string) (*container.HostConfig, error) {
	hc := &container.HostConfig{
		ReadonlyRootfs: h.ReadOnlyRoot,
		CapDrop:        slices.Clone(h.CapDrop),
		CapAdd:         slices.Clone(h.CapAdd),
		NetworkMode:    container.NetworkMode(h.Network),
		Init:           &h.Init,
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		LogConfig:      container.LogConfig{Type: "none"},
	}
	if engine == EnginePodman {
		// Podman's compat layer has no "none" log driver of that name in every version.
		hc.LogConfig = container.LogConfig{}
	}
	if h.NoNewPrivileges {
		hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges")
	}
	if h.Seccomp {
		if !strings.HasPrefix(seccomp, "seccomp=") {
			return nil, fmt.Errorf("hardening: no seccomp profile for %s", engine)
		}
		hc.SecurityOpt = append(hc.SecurityOpt, seccomp)
	}
	if h.TmpSize > 0 {
		hc.Tmpfs = map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d", h.TmpSize)}
	}
	if h.Pids > 0 {
		p := h.Pids
		hc.PidsLimit = &p
	}
	hc.NanoCPUs = h.NanoCPUs
	if h.Memory > 0 {
		hc.Memory = h.Memory
		hc.MemorySwap = h.Memory // no swap beyond the memory limit
	}
	ulimits := slices.Clone(h.Ulimits)
	if engine == EnginePodman {
		for _, u := range podmanUlimits {
			name, _, _ := strings.Cut(u, "=")
			if !slices.ContainsFunc(ulimits, func(s string) bool { return strings.HasPrefix(s, name+"=") }) {
				ulimits = append(ulimits, u)
			}
		}
	}
	for _, u := range ulimits {
		ul, err := parseUlimit(u)
		if err != nil {
			return nil, err
		}
		hc.Ulimits = append(hc.Ulimits, ul)
	}
	return hc, nil
}

// HardeningMismatchError says which settings the engine did not apply.
type HardeningMismatchError struct {
	Container string
	Engine    string
	// Settings lists each mismatch as "setting: asked X, engine has Y".
	Settings []string
}

func (e *HardeningMismatchError) Error() string {
	return fmt.Sprintf("container %s: %s did not apply the sandbox hardening (refusing to use it): %s",
		e.Container, e.Engine, strings.Join(e.Settings, "; "))
}

// verify compares what the engine reports for a container with what the
// profile asks. An engine that silently ignores a setting is caught here.
// seccomp is the SecurityOpt hostConfig was given.
func (h Hardening) verify(engine, seccomp string, c container.InspectResponse) []string {
	var bad []string
	add := func(setting string, want, got any) {
		bad = append(bad, fmt.Sprintf("%s: asked %v, engine has %v", setting, want, got))
	}
	hc := c.HostConfig
	if hc == nil || c.Config == nil {
		return []string{"inspect: no HostConfig or Config in the engine's answer"}
	}
	if hc.ReadonlyRootfs != h.ReadOnlyRoot {
		add("ReadonlyRootfs", h.ReadOnlyRoot, hc.ReadonlyRootfs)
	}
	if !capsDropped(h.CapDrop, hc.CapDrop) {
		add("CapDrop", h.CapDrop, hc.CapDrop)
	}
	if len(h.CapAdd) == 0 && len(hc.CapAdd) > 0 {
		add("CapAdd", h.CapAdd, hc.CapAdd)
	}
	if h.NoNewPrivileges && !slices.ContainsFunc(hc.SecurityOpt, isNoNewPrivileges) {
		add("SecurityOpt", "no-new-privileges", hc.SecurityOpt)
	}
	if h.Seccomp && !hasSeccomp(hc.SecurityOpt, seccomp) {
		add("SecurityOpt", "conch's seccomp profile "+SeccompDigest(), summarizeSecurityOpt(hc.SecurityOpt))
	}
	if h.Pids > 0 && (hc.PidsLimit == nil || *hc.PidsLimit != h.Pids) {
		got := "unlimited"
		if hc.PidsLimit != nil {
			got = strconv.FormatInt(*hc.PidsLimit, 10)
		}
		add("PidsLimit", h.Pids, got)
	}
	if h.NanoCPUs > 0 && hc.NanoCPUs != h.NanoCPUs && !quotaMatches(h.NanoCPUs, hc.CPUQuota, hc.CPUPeriod) {
		add("NanoCpus", h.NanoCPUs, fmt.Sprintf("NanoCpus=%d CpuQuota=%d CpuPeriod=%d", hc.NanoCPUs, hc.CPUQuota, hc.CPUPeriod))
	}
	if hc.Memory != h.Memory {
		add("Memory", h.Memory, hc.Memory)
	}
	if c.Config.User != h.containerUser() {
		add("User", h.containerUser(), c.Config.User)
	}
	if string(hc.NetworkMode) != h.Network && !(h.Network == "none" && engine == EnginePodman && hc.NetworkMode == "") {
		add("NetworkMode", h.Network, hc.NetworkMode)
	}
	if h.Init && (hc.Init == nil || !*hc.Init) {
		got := "unset"
		if hc.Init != nil {
			got = strconv.FormatBool(*hc.Init)
		}
		add("Init", true, got)
	}
	if h.TmpSize > 0 {
		if _, ok := hc.Tmpfs["/tmp"]; !ok && !mountsTmpfs(c, "/tmp") {
			add("Tmpfs", "/tmp", hc.Tmpfs)
		}
	}
	return bad
}

// containerUser is the container's own user: init's and the main process's.
func (h Hardening) containerUser() string {
	if h.InitUser != "" {
		return h.InitUser
	}
	return h.User
}

func isNoNewPrivileges(s string) bool {
	s = strings.ReplaceAll(s, "=", ":")
	return s == "no-new-privileges" || s == "no-new-privileges:true"
}

// capsDropped reports whether the engine's CapDrop covers what was asked.
// Podman reports ALL expanded into the capabilities it would have granted.
func capsDropped(want, got []string) bool {
	norm := func(s string) string { return strings.TrimPrefix(strings.ToUpper(s), "CAP_") }
	have := map[string]bool{}
	for _, g := range got {
		have[norm(g)] = true
	}
	for _, w := range want {
		w = norm(w)
		if have[w] {
			continue
		}
		if w == "ALL" && len(got) > 0 && defaultCapsCovered(have) {
			continue
		}
		return false
	}
	return true
}

// defaultCaps are the capabilities engines grant by default.
var defaultCaps = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT"}

func defaultCapsCovered(have map[string]bool) bool {
	for _, c := range defaultCaps {
		if !have[c] {
			return false
		}
	}
	return true
}

func quotaMatches(nano, quota, period int64) bool {
	return period > 0 && quota*1e9/period == nano
}

func mountsTmpfs(c container.InspectResponse, dst string) bool {
	for _, m := range c.Mounts {
		if m.Destination == dst && m.Type == "tmpfs" {
			return true
		}
	}
	return false
}
