package docker

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/moby/profiles/seccomp"
)

// Sandboxes get one seccomp profile on both engines: Docker's default
// profile (github.com/moby/profiles/seccomp, the code dockerd itself uses),
// given explicitly. Podman's own default lets a process without
// capabilities create a user namespace (`unshare -Ur`, and in it mount and
// network namespaces), which opens kernel code to the tools that Docker's
// refuses: unshare, clone and clone3 with namespace flags (clone3 answers
// ENOSYS so glibc falls back to clone), setns, mount, keyctl, bpf,
// userfaultfd, perf_event_open and the rest need CAP_SYS_ADMIN or another
// capability the sandbox never has. Given explicitly it also shows in the
// engine's inspect, where verify checks it.
//
// The engines take it differently: dockerd wants the JSON itself in
// HostConfig.SecurityOpt (`seccomp=<json>`), Podman's compat API wants a
// path to a file on its host (`seccomp=<path>`) and refuses inline JSON.
// Both report back what they were given.

// seccompProfile returns the profile as JSON and a digest of it.
var seccompProfile = sync.OnceValues(func() ([]byte, string) {
	b, err := json.Marshal(seccomp.DefaultProfile())
	if err != nil {
		panic(fmt.Sprintf("seccomp profile: %v", err)) // a static value; cannot fail
	}
	s := sha256.Sum256(b)
	return b, hex.EncodeToString(s[:])[:16]
})

// SeccompDigest identifies the seccomp profile sandboxes get.
func SeccompDigest() string { _, d := seccompProfile(); return d }

// seccompOpt returns the SecurityOpt that gives a container the profile on
// engine. For Podman it writes the profile under dataDir/seccomp, named by
// its digest, so a file's content never changes under a container.
func seccompOpt(engine, dataDir string) (string, error) {
	b, digest := seccompProfile()
	if engine != EnginePodman {
		return "seccomp=" + string(b), nil
	}
	dir := filepath.Join(dataDir, "seccomp")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	path := filepath.Join(dir, "conch-"+digest+".json")
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return "seccomp=" + path, nil
	}
	tmp, err := os.CreateTemp(dir, ".seccomp-*")
	if err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("seccomp profile: %w", werr)
	}
	return "seccomp=" + path, nil
}

// hasSeccomp reports whether the engine's SecurityOpt carries want: the
// same path, or the same profile (compared as compacted JSON, in case an
// engine reformats it).
func hasSeccomp(got []string, want string) bool {
	wantVal, _ := strings.CutPrefix(want, "seccomp=")
	for _, g := range got {
		v, ok := strings.CutPrefix(g, "seccomp=")
		if !ok {
			if v, ok = strings.CutPrefix(g, "seccomp:"); !ok {
				continue
			}
		}
		if v == wantVal || (strings.HasPrefix(v, "{") && compactJSON(v) == compactJSON(wantVal)) {
			return true
		}
	}
	return false
}

func compactJSON(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s
	}
	return b.String()
}

// summarizeSecurityOpt shortens inline seccomp profiles for people: conch's
// own is named by its digest, another by its size and hash.
func summarizeSecurityOpt(opts []string) []string {
	ours, digest := seccompProfile()
	out := make([]string, len(opts))
	for i, o := range opts {
		v, ok := strings.CutPrefix(o, "seccomp=")
		switch {
		case ok && strings.HasPrefix(v, "{") && compactJSON(v) == string(ours):
			o = "seccomp=<conch profile " + digest + ">"
		case len(o) > 80:
			s := sha256.Sum256([]byte(o))
			o = fmt.Sprintf("%s… (%d bytes, sha256 %s)", o[:40], len(o), hex.EncodeToString(s[:])[:12])
		}
		out[i] = o
	}
	return out
}
