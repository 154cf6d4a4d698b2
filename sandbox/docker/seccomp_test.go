package docker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSeccompProfileRefusesNamespaces reads the profile sandboxes get and
// checks the rules the containment depends on, so a newer moby/profiles
// that loosened one is noticed here: namespace syscalls and the other
// kernel surfaces are allowed only with capabilities the sandbox never
// has, and clone3 answers ENOSYS (glibc then falls back to clone, which
// the profile checks by its flags).
func TestSeccompProfileRefusesNamespaces(t *testing.T) {
	b, _ := seccompProfile()
	var p struct {
		DefaultAction   string `json:"defaultAction"`
		DefaultErrnoRet *uint  `json:"defaultErrnoRet"`
		Syscalls        []struct {
			Names    []string `json:"names"`
			Action   string   `json:"action"`
			ErrnoRet *uint    `json:"errnoRet"`
			Args     []struct {
				Index uint   `json:"index"`
				Value uint64 `json:"value"`
				Op    string `json:"op"`
			} `json:"args"`
			Includes struct {
				Caps []string `json:"caps"`
			} `json:"includes"`
			Excludes struct {
				Caps []string `json:"caps"`
			} `json:"excludes"`
		} `json:"syscalls"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Fatalf("default action %q, want SCMP_ACT_ERRNO", p.DefaultAction)
	}
	// allowedWithout reports whether a rule allows name to a container
	// holding no capabilities at all, and how.
	allowedWithout := func(name string) (unconditional, withArgs bool) {
		for _, s := range p.Syscalls {
			if !slices.Contains(s.Names, name) || s.Action != "SCMP_ACT_ALLOW" || len(s.Includes.Caps) > 0 {
				continue
			}
			if len(s.Args) == 0 {
				unconditional = true
			} else {
				withArgs = true
			}
		}
		return
	}
	for _, name := range []string{"unshare", "setns", "mount", "umount2", "pivot_root", "keyctl", "add_key",
		"request_key", "bpf", "userfaultfd", "perf_event_open", "kexec_load", "init_module", "open_by_handle_at",
		"io_uring_setup", "clone3"} {
		if u, a := allowedWithout(name); u || a {
			t.Errorf("%s is allowed without capabilities", name)
		}
	}
	if u, a := allowedWithout("clone"); u || !a {
		t.Errorf("clone: unconditional %v, with argument checks %v; want allowed only by its flags", u, a)
	}
	enosys := false
	for _, s := range p.Syscalls {
		if slices.Contains(s.Names, "clone3") && s.Action == "SCMP_ACT_ERRNO" && s.ErrnoRet != nil && *s.ErrnoRet == 38 &&
			slices.Contains(s.Excludes.Caps, "CAP_SYS_ADMIN") {
			enosys = true
		}
	}
	if !enosys {
		t.Errorf("clone3 does not answer ENOSYS (38) without CAP_SYS_ADMIN: glibc would not fall back to clone")
	}
	for _, name := range []string{"clone", "epoll_wait", "epoll_pwait", "prctl", "setsid", "setpgid", "execve", "wait4"} {
		if u, a := allowedWithout(name); !u && !a {
			t.Errorf("%s is refused: the agent, tmux and the coding-agent CLIs need it", name)
		}
	}
}

func TestSeccompOpt(t *testing.T) {
	b, digest := seccompProfile()
	opt, err := seccompOpt(EngineDocker, t.TempDir())
	if err != nil || opt != "seccomp="+string(b) {
		t.Fatalf("docker: got %.80q, %v; want the profile inline", opt, err)
	}
	dir := t.TempDir()
	opt, err = seccompOpt(EnginePodman, dir)
	path := filepath.Join(dir, "seccomp", "conch-"+digest+".json")
	if err != nil || opt != "seccomp="+path {
		t.Fatalf("podman: got %q, %v; want seccomp=%s", opt, err, path)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(b) {
		t.Fatalf("podman's profile file: %v, same content %v", err, string(got) == string(b))
	}
	// A damaged file is written again.
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := seccompOpt(EnginePodman, dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(b) {
		t.Errorf("a damaged profile file was kept")
	}
	if !hasSeccomp([]string{"seccomp:" + path}, opt) || hasSeccomp([]string{"seccomp=" + path + "x"}, opt) {
		t.Errorf("hasSeccomp compares paths wrongly")
	}
	if got := summarizeSecurityOpt([]string{"no-new-privileges", "seccomp=" + string(b)}); got[1] != "seccomp=<conch profile "+digest+">" {
		t.Errorf("summarizeSecurityOpt: got %q", got)
	}
	spaced := strings.Replace(string(b), ",", ", ", 5)
	if !hasSeccomp([]string{"seccomp=" + spaced}, "seccomp="+string(b)) {
		t.Errorf("hasSeccomp: a reformatted profile is not recognised")
	}
}
