package egress_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/egress"
	"conch/internal/testenv/fakellm"
	"conch/terminal/terminaltest"
)

// clientScript connects to the bridge's port argv[1], sends a line and
// prints what came back.
const clientScript = `import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"ping through the bridge\n")
print(s.makefile().readline().strip())
`

func TestBridgeCarriesSandboxConnections(t *testing.T) {
	terminaltest.Each(t, func(t *testing.T, b *terminaltest.Box) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		dir := b.Opts.RunDir
		if dir == "" {
			dir = "/tmp/conch"
		}
		br, err := egress.StartBridge(ctx, b.SB, lineEcho{}, egress.BridgeOptions{Dir: dir})
		if err != nil {
			t.Fatalf("StartBridge: %v", err)
		}
		t.Cleanup(func() { br.Close() })
		if !strings.HasPrefix(br.URL(), "http://127.0.0.1:") {
			t.Fatalf("URL: got %q", br.URL())
		}
		if err := b.SB.WriteFile(ctx, dir+"/client.py", []byte(clientScript), 0o644); err != nil {
			t.Fatal(err)
		}
		for range 2 { // one connection after another
			res, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"python3", dir + "/client.py", strconv.Itoa(br.Port())}, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			got, want := strings.TrimSpace(string(res.Output)), "echo: ping through the bridge"
			if res.ExitCode != 0 || got != want {
				t.Errorf("a connection from the sandbox: got exit %d %q, want %q", res.ExitCode, got, want)
			}
		}
	})
}

// TestBridgesRelease: a conversation's bridge is reused while it lives and
// closed by Release (conch.Releaser), after which its port refuses
// connections and the next URL starts a new one.
func TestBridgesRelease(t *testing.T) {
	b := terminaltest.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bs := egress.NewBridges(lineEcho{}, egress.BridgeOptions{Dir: b.Opts.RunDir})
	t.Cleanup(func() { bs.Close() })
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "release"}
	u1, err := bs.URL(ctx, key, b.SB)
	if err != nil {
		t.Fatalf("URL: %v", err)
	}
	if u, err := bs.URL(ctx, key, b.SB); err != nil || u != u1 {
		t.Fatalf("URL again: got %q, %v; want the same bridge %q", u, err, u1)
	}
	if err := bs.Release(ctx, key); err != nil {
		t.Fatalf("Release: %v", err)
	}
	port := strings.TrimPrefix(u1, "http://127.0.0.1:")
	res, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"python3", "-c",
		"import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5)\n    print('open')\nexcept OSError:\n    print('refused')", port}, Timeout: 30 * time.Second})
	if err != nil || strings.TrimSpace(string(res.Output)) != "refused" {
		t.Fatalf("the released bridge's port: got %q, %v; want refused", res.Output, err)
	}
	if err := bs.Release(ctx, key); err != nil {
		t.Errorf("Release twice: %v", err)
	}
	if _, err := bs.URL(ctx, key, b.SB); err != nil {
		t.Fatalf("URL after Release: %v", err)
	}
}

// anthropicClient is a CLI's request as the sandbox makes it: plain HTTP to
// the base URL in argv[1] with the key in argv[2], streaming (SSE). It
// prints the status and the body.
const anthropicClient = `import json, sys, urllib.error, urllib.request
base, key = sys.argv[1], sys.argv[2]
body = json.dumps({"model": "claude-test", "max_tokens": 64, "stream": True,
    "messages": [{"role": "user", "content": "hi"}]}).encode()
req = urllib.request.Request(base + "/v1/messages", data=body, headers={
    "x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        print(r.status)
        sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code)
    print(e.read().decode())
`

// keyScan prints every process environment, command line and file (under
// the directories in argv) that holds the string on its stdin, or "clean".
const keyScan = `import os, sys
needle = sys.stdin.read().strip().encode()
hits = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for f in ("environ", "cmdline"):
            p = "/proc/%s/%s" % (pid, f)
            try:
                if needle in open(p, "rb").read():
                    hits.append(p)
            except OSError:
                pass
for root in sys.argv[1:]:
    for d, _, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            try:
                if os.path.isfile(p) and needle in open(p, "rb").read():
                    hits.append(p)
            except OSError:
                pass
print("\n".join(hits) if hits else "clean")
`

// sandboxRequest runs anthropicClient in the sandbox against base.
func sandboxRequest(ctx context.Context, t *testing.T, sb conch.Sandbox, dir, base string) string {
	t.Helper()
	res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"python3", dir + "/client.py", base, egress.PlaceholderKey}, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("client in the sandbox: %v", err)
	}
	return string(res.Output)
}

// TestInjectorKeyStaysOutside: a CLI-shaped client in a real sandbox
// reaches a host upstream through Bridge and Injector; the upstream gets the
// real key; the key is nowhere in the container.
func TestInjectorKeyStaysOutside(t *testing.T) {
	b := terminaltest.Container(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	up := fakellm.New(t)
	up.Push(fakellm.Text("streamed through the bridge"))
	in, err := egress.NewInjector(egress.InjectorOptions{Vendor: egress.Anthropic, Key: realKey, BaseURL: up.URL()})
	if err != nil {
		t.Fatal(err)
	}
	bs := egress.NewBridges(in, egress.BridgeOptions{Port: egress.DefaultBridgePort})
	t.Cleanup(func() { bs.Close() })
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "inject"}
	origin, err := bs.URL(ctx, key, b.SB)
	if err != nil {
		t.Fatalf("URL: %v", err)
	}
	if want := "http://127.0.0.1:" + strconv.Itoa(egress.DefaultBridgePort); origin != want {
		t.Fatalf("URL: got %q, want %q", origin, want)
	}
	dir := "/tmp/conch"
	if err := b.SB.WriteFile(ctx, dir+"/client.py", []byte(anthropicClient), 0o644); err != nil {
		t.Fatal(err)
	}
	out := sandboxRequest(ctx, t, b.SB, dir, in.ClientBaseURL(origin))
	if !strings.HasPrefix(out, "200\n") || !strings.Contains(out, "event: message_stop") || !strings.Contains(out, `"text":"bridge"`) {
		t.Fatalf("the sandbox's request: got %q, want 200 and the streamed answer", out)
	}
	got, ok := up.Last()
	if !ok || got.APIKey != realKey || !got.Stream {
		t.Fatalf("the upstream got key %q (stream %v), want the real key", got.APIKey, got.Stream)
	}

	scan := func(needle string) string {
		t.Helper()
		if err := b.SB.WriteFile(ctx, dir+"/scan.py", []byte(keyScan), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"python3", dir + "/scan.py", "/workspace", "/tmp", "/home", "/root"},
			Stdin: strings.NewReader(needle), Timeout: time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("scan: %v %s", err, res.Output)
		}
		return strings.TrimSpace(string(res.Output))
	}
	// The scan finds what is there: a marker in the workspace.
	marker := "marker-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := b.SB.WriteFile(ctx, "/workspace/marker.txt", []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := scan(marker); !strings.Contains(got, "/workspace/marker.txt") {
		t.Fatalf("the scan did not find a marker written in the workspace: %q", got)
	}
	if got := scan(realKey); got != "clean" {
		t.Errorf("the real key is in the container: %s", got)
	}
}

// TestBridgesRestoredAfterRestart: a new Bridges over the same sandbox (a
// restart of conch: the old one's host side is gone) takes the same port
// over, and a request from inside the sandbox works again; so it does after
// the bridge's exec stream ended.
func TestBridgesRestoredAfterRestart(t *testing.T) {
	terminaltest.Each(t, func(t *testing.T, b *terminaltest.Box) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		up := fakellm.New(t)
		up.Handle(func(fakellm.Request) fakellm.Reply { return fakellm.Text("ok") })
		injector := func(key string) *egress.Injector {
			in, err := egress.NewInjector(egress.InjectorOptions{Vendor: egress.Anthropic, Key: key, BaseURL: up.URL()})
			if err != nil {
				t.Fatal(err)
			}
			return in
		}
		dir := b.Opts.RunDir
		if dir == "" {
			dir = "/tmp/conch"
		}
		if err := b.SB.WriteFile(ctx, dir+"/client.py", []byte(anthropicClient), 0o644); err != nil {
			t.Fatal(err)
		}
		// A fixed port; on the host one that is free there.
		o := egress.BridgeOptions{Port: egress.DefaultBridgePort, Dir: dir}
		if b.Host {
			o.Port = closedPort(t)
		}
		key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "restart"}
		request := func(bs *egress.Bridges, wantKey string) string {
			t.Helper()
			origin, err := bs.URL(ctx, key, b.SB)
			if err != nil {
				t.Fatalf("URL: %v", err)
			}
			if out := sandboxRequest(ctx, t, b.SB, dir, origin); !strings.HasPrefix(out, "200\n") {
				t.Fatalf("request through %s: got %q", origin, out)
			}
			if got, _ := up.Last(); got.APIKey != wantKey {
				t.Fatalf("upstream got key %q, want %q", got.APIKey, wantKey)
			}
			return origin
		}

		before := egress.NewBridges(injector("key-of-the-first-conch"), o)
		t.Cleanup(func() { before.Close() })
		u1 := request(before, "key-of-the-first-conch")
		old := before.BridgeOf(key)

		after := egress.NewBridges(injector("key-of-the-second-conch"), o)
		t.Cleanup(func() { after.Close() })
		if u2 := request(after, "key-of-the-second-conch"); u2 != u1 {
			t.Fatalf("after the restart the bridge moved from %s to %s", u1, u2)
		}
		select {
		case <-old.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the earlier conch's listener still runs after the new one took its port")
		}

		// The bridge's exec stream ends (its listener is killed): the next
		// URL starts it again on the same port.
		cur := after.BridgeOf(key)
		res, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", "kill -9 $(cat " + dir + "/egress-bridge-" + strconv.Itoa(o.Port) + ".pid)"}, Timeout: 30 * time.Second})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("kill the listener: %v %s", err, res.Output)
		}
		select {
		case <-cur.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the bridge did not notice its listener ended")
		}
		if u3 := request(after, "key-of-the-second-conch"); u3 != u1 {
			t.Fatalf("the restarted bridge moved from %s to %s", u1, u3)
		}
		if after.BridgeOf(key) == cur {
			t.Fatal("URL returned the dead bridge")
		}
	})
}
