package egress_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/egress"
	"conch/terminal/terminaltest"
)

// clientScript connects through the proxy at argv[1] to argv[2], sends a
// line and prints what came back.
const clientScript = `import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[2], sys.argv[2])).encode())
head = b""
while b"\r\n\r\n" not in head:
    b = s.recv(1)
    if not b:
        break
    head += b
print(head.split(b"\r\n")[0].decode())
if b" 200 " in head:
    s.sendall(b"ping through the bridge\n")
    print(s.makefile().readline().strip())
else:
    print(s.recv(4096).decode().strip())
`

func TestBridgeCarriesSandboxConnections(t *testing.T) {
	terminaltest.Each(t, func(t *testing.T, b *terminaltest.Box) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		echo := echoServer(t)
		proxy := egress.New(egress.Options{Hosts: []string{"localhost"}, Ports: []int{echo}, AllowPrivate: true})
		dir := b.Opts.RunDir
		if dir == "" {
			dir = "/tmp/conch"
		}
		br, err := egress.StartBridge(ctx, b.SB, proxy, egress.BridgeOptions{Dir: dir})
		if err != nil {
			t.Fatalf("StartBridge: %v", err)
		}
		t.Cleanup(func() { br.Close() })
		if !strings.HasPrefix(br.ProxyURL(), "http://127.0.0.1:") {
			t.Fatalf("ProxyURL: got %q", br.ProxyURL())
		}
		if err := b.SB.WriteFile(ctx, dir+"/client.py", []byte(clientScript), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ target, want string }{
			{"localhost:" + strconv.Itoa(echo), "HTTP/1.1 200 Connection established\nping through the bridge"},
			{"evil.test:" + strconv.Itoa(echo), "HTTP/1.1 403 Forbidden\nconch egress: host evil.test is not allowed"},
		} {
			res, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"python3", dir + "/client.py", strconv.Itoa(br.Port()), tc.target}, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			got := strings.TrimSpace(string(res.Output))
			if res.ExitCode != 0 || !strings.HasPrefix(got, tc.want) {
				t.Errorf("CONNECT %s from the sandbox: got exit %d %q, want %q", tc.target, res.ExitCode, got, tc.want)
			}
		}
	})
}

// TestBridgesRelease: a conversation's bridge is reused while it lives and
// closed by Release (conch.Releaser), after which its port refuses
// connections and the next ProxyURL starts a new one.
func TestBridgesRelease(t *testing.T) {
	b := terminaltest.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bs := egress.NewBridges(egress.New(egress.Options{Hosts: []string{"localhost"}}), egress.BridgeOptions{Dir: b.Opts.RunDir})
	t.Cleanup(func() { bs.Close() })
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "release"}
	u1, err := bs.ProxyURL(ctx, key, b.SB)
	if err != nil {
		t.Fatalf("ProxyURL: %v", err)
	}
	if u, err := bs.ProxyURL(ctx, key, b.SB); err != nil || u != u1 {
		t.Fatalf("ProxyURL again: got %q, %v; want the same bridge %q", u, err, u1)
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
	if _, err := bs.ProxyURL(ctx, key, b.SB); err != nil {
		t.Fatalf("ProxyURL after Release: %v", err)
	}
}
