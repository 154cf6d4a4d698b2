package docker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"conch"

	"github.com/moby/moby/api/types/container"
)

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{"!abc123:example.com", "abc123-example-com"},
		{"!a:b.c", "a-b-c"},
		{"!a-b.c", "a-b-c"},
		{"Alice@Example.ORG", "alice-example-org"},
		{"---", "x"},
		{"", "x"},
		{"ünïcödé", "n-c-d"},
		{strings.Repeat("ab", 50), strings.Repeat("ab", 20)},
	}
	for _, tt := range tests {
		if got := Slug(tt.in); got != tt.want {
			t.Errorf("Slug(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestContainerName(t *testing.T) {
	a := conch.ConversationKey{Channel: conch.ChannelMatrix, ID: "!a:b.c"}
	b := conch.ConversationKey{Channel: conch.ChannelMatrix, ID: "!a-b.c"}
	na, nb := ContainerName("i1", a), ContainerName("i1", b)
	if !strings.HasPrefix(na, "conch-matrix-a-b-c-") || len(na) != len("conch-matrix-a-b-c-")+8 {
		t.Errorf("got %q, want conch-matrix-a-b-c-<hash8>", na)
	}
	if na == nb {
		t.Errorf("colliding slugs got one name %q", na)
	}
	if ContainerName("i2", a) == na {
		t.Errorf("two instances got one name %q", na)
	}
	if ContainerName("i1", a) != na {
		t.Errorf("name is not stable")
	}
	// Length-prefixed hashing: moving a boundary changes the hash.
	if hash8("ab", "c") == hash8("a", "bc") {
		t.Errorf("hash8 collides across part boundaries")
	}
}

func TestDetectHost(t *testing.T) {
	dir := t.TempDir()
	podSock := filepath.Join(dir, "podman", "podman.sock")
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got, _ := DetectHost("tcp://1.2.3.4:2375", "", env(nil)); got != "tcp://1.2.3.4:2375" {
		t.Errorf("configured host: got %q", got)
	}
	if got, _ := DetectHost("", "", env(map[string]string{"DOCKER_HOST": "unix:///x.sock"})); got != "unix:///x.sock" {
		t.Errorf("DOCKER_HOST: got %q", got)
	}
	_, err := DetectHost("", "podman", env(map[string]string{"XDG_RUNTIME_DIR": dir}))
	if !errors.Is(err, ErrNoEngine) || conch.KindOf(err) != conch.KindUnavailable {
		t.Errorf("nothing there: got %v, want ErrNoEngine of kind unavailable", err)
	}
	if err := os.MkdirAll(filepath.Dir(podSock), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := listenUnix(podSock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got, err := DetectHost("", "auto", env(map[string]string{"XDG_RUNTIME_DIR": dir}))
	if err != nil || got != "unix://"+podSock {
		// Skip only if a system Docker socket exists and wins, which is right.
		if _, serr := os.Stat("/var/run/docker.sock"); serr != nil {
			t.Errorf("rootless podman socket: got %q, %v; want unix://%s", got, err, podSock)
		}
	}
}

func frame(kind byte, payload string) []byte {
	h := make([]byte, 8)
	h[0] = kind
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

func TestDemux(t *testing.T) {
	var in bytes.Buffer
	in.Write(frame(streamStdout, "hello "))
	in.Write(frame(streamStderr, "oops\n"))
	in.Write(frame(streamStdout, "world"))
	in.Write(frame(streamSystem, "ignored"))
	in.Write(frame(streamStdout, ""))
	var errb bytes.Buffer
	got, err := io.ReadAll(&demux{src: &in, stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "hello world" || errb.String() != "oops\n" {
		t.Errorf("got stdout %q stderr %q, want %q and %q", got, errb.String(), "hello world", "oops\n")
	}
	// Small reads split frames correctly.
	in.Reset()
	in.Write(frame(streamStdout, "abcdef"))
	d := &demux{src: &in}
	p := make([]byte, 4)
	n, _ := d.Read(p)
	m, _ := d.Read(p[n:])
	if string(p[:n+m]) != "abcd" {
		t.Errorf("split read: got %q, want abcd", p[:n+m])
	}
	// A truncated frame is an error, not silent loss.
	trunc := frame(streamStdout, "abcdef")[:10]
	if _, err := io.ReadAll(&demux{src: bytes.NewReader(trunc)}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated frame: got %v, want ErrUnexpectedEOF", err)
	}
	// A raw (TTY) stream is refused with a reason.
	if _, err := io.ReadAll(&demux{src: strings.NewReader("plain text output")}); err == nil || !strings.Contains(err.Error(), "TTY") {
		t.Errorf("raw stream: got %v, want an error naming the TTY", err)
	}
}

func TestOutputSink(t *testing.T) {
	var seen []byte
	s := &outputSink{limit: 5, onOutput: func(b []byte) { seen = append(seen, b...) }}
	for _, p := range []string{"ab", "cd", "efg", "h"} {
		s.Write([]byte(p))
	}
	if string(s.buf) != "abcde" || !s.truncated || string(seen) != "abcdefgh" {
		t.Errorf("got buf %q truncated %v seen %q; want abcde, true, abcdefgh", s.buf, s.truncated, seen)
	}
	s = &outputSink{limit: 4}
	s.Write([]byte("abcd"))
	if s.truncated {
		t.Errorf("output exactly at the limit reported truncated")
	}
}

func TestPidStripper(t *testing.T) {
	var out bytes.Buffer
	p := &pidStripper{w: &out, pid: make(chan int, 1)}
	p.Write([]byte("12"))
	p.Write([]byte("34\nhello"))
	p.Write([]byte(" there"))
	if pid := <-p.pid; pid != 1234 || out.String() != "hello there" {
		t.Errorf("got pid %d output %q, want 1234 and %q", pid, out.String(), "hello there")
	}
}

func TestParseFind(t *testing.T) {
	out := "b.txt\x0012\x00644\x001700000000.5\x00f\x00" + "a\x004096\x00755\x001700000000.0\x00d\x00" + "l\x003\x00777\x001700000000.0\x00l\x00"
	got, err := parseFind([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []conch.FileInfo{
		{Name: "a", Size: 4096, Mode: fs.ModeDir | 0o755, ModTime: time.Unix(1700000000, 0).UTC(), IsDir: true},
		{Name: "b.txt", Size: 12, Mode: 0o644, ModTime: time.Unix(1700000000, 5e8).UTC()},
		{Name: "l", Size: 3, Mode: fs.ModeSymlink | 0o777, ModTime: time.Unix(1700000000, 0).UTC()},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseFind([]byte("x\x001\x00")); err == nil {
		t.Errorf("malformed output: got no error")
	}
	if got, err := parseFind(nil); err != nil || len(got) != 0 {
		t.Errorf("empty dir: got %v, %v", got, err)
	}
}

func TestParseOOMKill(t *testing.T) {
	for in, want := range map[string]int64{
		"low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n":     2,
		"oom_kill_disable 0\nunder_oom 0\noom_kill 7\n": 7,
		"oom_kill_disable 0\nunder_oom 0\n":             -1,
	} {
		got, ok := parseOOMKill([]byte(in))
		if got != want || ok != (want >= 0) {
			t.Errorf("parseOOMKill(%q): got %d %v, want %d", in, got, ok, want)
		}
	}
}

func TestRegistry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "sandboxes.json")
	r, err := openRegistry(path)
	if err != nil {
		t.Fatal(err)
	}
	k := conch.ConversationKey{Channel: "web", ID: "x"}
	if err := r.put("conch-web-x-12345678", regEntry{Conversation: k.String(), Volume: "conch-pool-a-b"}); err != nil {
		t.Fatal(err)
	}
	r2, err := openRegistry(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := r2.volumeOf(k); !ok || v != "conch-pool-a-b" {
		t.Errorf("reopened: got %q %v, want the pool volume", v, ok)
	}
	if got := r2.containerOfVolume("conch-pool-a-b"); got != "conch-web-x-12345678" {
		t.Errorf("containerOfVolume: got %q", got)
	}
	if err := r2.delete("conch-web-x-12345678"); err != nil {
		t.Fatal(err)
	}
	if r3, _ := openRegistry(path); len(r3.m) != 0 {
		t.Errorf("after delete: got %v, want empty", r3.m)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openRegistry(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("corrupt file: got %v, want an error naming it", err)
	}
}

// The seccomp options as the runtime hands them to each engine.
var (
	dockerSeccomp = func() string { b, _ := seccompProfile(); return "seccomp=" + string(b) }()
	podmanSeccomp = "seccomp=/data/seccomp/conch-" + SeccompDigest() + ".json"
)

func TestHostConfig(t *testing.T) {
	h := DefaultHardening()
	hc, err := h.hostConfig(EngineDocker, dockerSeccomp)
	if err != nil {
		t.Fatal(err)
	}
	if !hc.ReadonlyRootfs || hc.CapDrop[0] != "ALL" || hc.SecurityOpt[0] != "no-new-privileges" || !*hc.Init ||
		*hc.PidsLimit != 128 || hc.NanoCPUs != 1e9 || hc.Memory != 512<<20 || hc.MemorySwap != 512<<20 ||
		hc.NetworkMode != "none" || !strings.Contains(hc.Tmpfs["/tmp"], "size=268435456") || len(hc.Ulimits) != 1 {
		t.Errorf("docker host config does not carry the default hardening: %+v", hc)
	}
	if !slices.Contains(hc.SecurityOpt, dockerSeccomp) {
		t.Errorf("docker host config has no seccomp profile: %.200q", hc.SecurityOpt)
	}
	if _, err := h.hostConfig(EngineDocker, ""); err == nil {
		t.Errorf("a profile asking for seccomp without one: got no error")
	}
	hc, _ = h.hostConfig(EnginePodman, podmanSeccomp)
	if !slices.Contains(hc.SecurityOpt, podmanSeccomp) {
		t.Errorf("podman host config: got %q, want %q", hc.SecurityOpt, podmanSeccomp)
	}
	names := map[string]bool{}
	for _, u := range hc.Ulimits {
		names[u.Name] = true
	}
	if !names["nofile"] || !names["nproc"] {
		t.Errorf("podman ulimits: got %v, want nofile and nproc", hc.Ulimits)
	}
	h.Ulimits = []string{"nproc=10:10"}
	hc, _ = h.hostConfig(EnginePodman, podmanSeccomp)
	for _, u := range hc.Ulimits {
		if u.Name == "nproc" && u.Soft != 10 {
			t.Errorf("a profile's nproc was overridden: %+v", u)
		}
	}
}

func TestVerify(t *testing.T) {
	h := DefaultHardening()
	good := func() container.InspectResponse {
		hc, _ := h.hostConfig(EngineDocker, dockerSeccomp)
		return container.InspectResponse{HostConfig: hc, Config: &container.Config{User: h.InitUser}}
	}
	if bad := h.verify(EngineDocker, dockerSeccomp, good()); len(bad) != 0 {
		t.Fatalf("what was asked: got %v, want no mismatch", bad)
	}
	f := false
	zero := int64(0)
	tests := []struct {
		name, setting string
		change        func(*container.InspectResponse)
	}{
		{"writable root", "ReadonlyRootfs", func(c *container.InspectResponse) { c.HostConfig.ReadonlyRootfs = false }},
		{"caps kept", "CapDrop", func(c *container.InspectResponse) { c.HostConfig.CapDrop = nil }},
		{"caps added", "CapAdd", func(c *container.InspectResponse) { c.HostConfig.CapAdd = []string{"NET_ADMIN"} }},
		{"no-new-privileges dropped", "SecurityOpt", func(c *container.InspectResponse) { c.HostConfig.SecurityOpt = []string{dockerSeccomp} }},
		{"seccomp profile dropped", "SecurityOpt", func(c *container.InspectResponse) { c.HostConfig.SecurityOpt = []string{"no-new-privileges"} }},
		{"engine's own seccomp profile", "SecurityOpt", func(c *container.InspectResponse) {
			c.HostConfig.SecurityOpt = []string{"no-new-privileges", "seccomp=unconfined"}
		}},
		{"another seccomp profile", "SecurityOpt", func(c *container.InspectResponse) {
			c.HostConfig.SecurityOpt = []string{"no-new-privileges", `seccomp={"defaultAction":"SCMP_ACT_ALLOW"}`}
		}},
		{"pids ignored", "PidsLimit", func(c *container.InspectResponse) { c.HostConfig.PidsLimit = &zero }},
		{"pids unset", "PidsLimit", func(c *container.InspectResponse) { c.HostConfig.PidsLimit = nil }},
		{"cpu ignored", "NanoCpus", func(c *container.InspectResponse) { c.HostConfig.NanoCPUs = 0 }},
		{"memory ignored", "Memory", func(c *container.InspectResponse) { c.HostConfig.Memory = 0 }},
		{"root user", "User", func(c *container.InspectResponse) { c.Config.User = "" }},
		{"bridge network", "NetworkMode", func(c *container.InspectResponse) { c.HostConfig.NetworkMode = "bridge" }},
		{"no init", "Init", func(c *container.InspectResponse) { c.HostConfig.Init = &f }},
		{"no tmpfs", "Tmpfs", func(c *container.InspectResponse) { c.HostConfig.Tmpfs = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.change(&c)
			bad := h.verify(EngineDocker, dockerSeccomp, c)
			if len(bad) != 1 || !strings.HasPrefix(bad[0], tt.setting+":") {
				t.Errorf("got %v, want one mismatch on %s", bad, tt.setting)
			}
		})
	}
	// What the engines report in their own words is accepted.
	c := good()
	c.HostConfig.CapDrop = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
		"CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT"}
	c.HostConfig.SecurityOpt = []string{"no-new-privileges:true", podmanSeccomp}
	c.HostConfig.NanoCPUs, c.HostConfig.CPUQuota, c.HostConfig.CPUPeriod = 0, 100000, 100000
	if bad := h.verify(EnginePodman, podmanSeccomp, c); len(bad) != 0 {
		t.Errorf("podman's spelling: got %v, want no mismatch", bad)
	}
	err := &HardeningMismatchError{Container: "c", Engine: "podman", Settings: []string{"PidsLimit: asked 128, engine has 0"}}
	if !strings.Contains(err.Error(), "refusing") || !strings.Contains(err.Error(), "PidsLimit") {
		t.Errorf("error text %q does not say what and why", err)
	}
}

func TestHardeningValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Hardening)
		ok     bool
	}{
		{"default", func(*Hardening) {}, true},
		{"host network", func(h *Hardening) { h.Network = "host" }, false},
		{"tiny memory", func(h *Hardening) { h.Memory = 1 << 20 }, false},
		{"negative pids", func(h *Hardening) { h.Pids = -1 }, false},
		{"bad ulimit", func(h *Hardening) { h.Ulimits = []string{"nofile"} }, false},
		{"unlimited", func(h *Hardening) { h.Memory, h.Pids, h.NanoCPUs = 0, 0, 0 }, true},
	}
	for _, tt := range tests {
		h := DefaultHardening()
		tt.change(&h)
		if err := h.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: got %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
	if DefaultHardening().Hash() == (Hardening{}).Hash() {
		t.Errorf("profile hash does not change with the profile")
	}
}

func TestCheckStatic(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary is static when built with CGO_ENABLED=0 and dynamic
	// with cgo (under -race); either way the answer must match the ELF.
	err = CheckStatic(exe)
	if os.Getenv("CGO_ENABLED") == "0" && err != nil {
		t.Errorf("static test binary: got %v", err)
	}
	notELF := filepath.Join(t.TempDir(), "script")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	if err := CheckStatic(notELF); err == nil {
		t.Errorf("shell script: got no error")
	}
	if _, err := os.Stat("/bin/sh"); err == nil {
		if err := CheckStatic("/bin/sh"); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("dynamic /bin/sh: got %v, want a dynamically-linked error with the fix", err)
		}
	}
}
