package sandboxd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// rawPeer drives a Server with hand-made frames.
type rawPeer struct {
	t    *testing.T
	fr   *frameReader
	fw   *frameWriter
	conn net.Conn
	done chan error
}

func newRawPeer(t *testing.T) *rawPeer {
	t.Helper()
	cc, sc := net.Pipe()
	dir := t.TempDir()
	srv := &Server{Root: dir, Workspace: "/", MemoryEvents: "-"}
	p := &rawPeer{t: t, fr: newFrameReader(cc), fw: &frameWriter{w: cc}, conn: cc, done: make(chan error, 1)}
	go func() {
		p.done <- srv.Serve(context.Background(), sc, sc)
		sc.Close()
	}()
	t.Cleanup(func() {
		cc.Close()
		<-p.done
	})
	f := p.read()
	if f.typ != frameHello {
		t.Fatalf("first frame: got %s, want hello", f.typ)
	}
	var h hello
	if err := json.Unmarshal(f.payload, &h); err != nil || h.Proto != ProtoVersion || h.Version != Version {
		t.Fatalf("hello: got %+v, %v", h, err)
	}
	return p
}

func (p *rawPeer) read() frame {
	p.t.Helper()
	p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := p.fr.read()
	if err != nil {
		p.t.Fatalf("read frame: %v", err)
	}
	return f
}

func (p *rawPeer) request(id uint32, req request) {
	p.t.Helper()
	b, _ := json.Marshal(req)
	if err := p.fw.write(id, frameRequest, b); err != nil {
		p.t.Fatal(err)
	}
}

// result reads frames until stream id's result.
func (p *rawPeer) result(id uint32) result {
	p.t.Helper()
	for {
		f := p.read()
		if f.id != id || f.typ != frameResult {
			continue
		}
		var r result
		if err := json.Unmarshal(f.payload, &r); err != nil {
			p.t.Fatal(err)
		}
		return r
	}
}

// The server checks what the client is supposed to check, too.
func TestServerRejectsBadRequests(t *testing.T) {
	p := newRawPeer(t)
	tests := []struct {
		name     string
		req      request
		wantCode string
		wantMsg  string
	}{
		{"NUL in argv", request{Op: opExec, Argv: []string{"echo", "a\x00b"}}, codeInvalid, "argument 1 contains a NUL byte"},
		{"NUL in env", request{Op: opExec, Argv: []string{"true"}, Env: []string{"A=\x00"}}, codeInvalid, "NUL"},
		{"env without =", request{Op: opExec, Argv: []string{"true"}, Env: []string{"A"}}, codeInvalid, "KEY=value"},
		{"empty argv", request{Op: opExec}, codeInvalid, "no program"},
		{"unknown op", request{Op: "format-disk"}, codeInvalid, `unknown operation "format-disk"`},
		{"empty path", request{Op: opRead}, codeInvalid, "empty path"},
		{"program not found", request{Op: opExec, Argv: []string{"nope-nope"}}, codeNotFound, `"nope-nope" not found`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := uint32(i + 1)
			p.request(id, tt.req)
			r := p.result(id)
			if r.Error == nil {
				t.Fatalf("got %+v, want an error", r)
			}
			if r.Error.Code != tt.wantCode || !strings.Contains(r.Error.Message, tt.wantMsg) {
				t.Errorf("got %s %q, want %s containing %q", r.Error.Code, r.Error.Message, tt.wantCode, tt.wantMsg)
			}
		})
	}
	// The connection is still good.
	p.request(100, request{Op: opPing})
	if r := p.result(100); r.Version != Version {
		t.Errorf("ping: got %+v", r)
	}
}

func TestServerDropsProtocolViolations(t *testing.T) {
	tests := []struct {
		name string
		send func(p *rawPeer)
		want string
	}{
		{"oversized frame", func(p *rawPeer) {
			var hdr [headerSize]byte
			putHeader(hdr[:], 1, frameData, MaxFrame+1)
			p.conn.Write(hdr[:])
		}, "exceeds"},
		{"bad request json", func(p *rawPeer) { p.fw.write(1, frameRequest, []byte("{")) }, "request header"},
		{"unknown frame type", func(p *rawPeer) { p.fw.write(1, frameType(99), nil) }, "unexpected frame(99)"},
		{"result from the client", func(p *rawPeer) { p.fw.write(1, frameResult, []byte("{}")) }, "unexpected result"},
		{"bad window", func(p *rawPeer) { p.fw.write(1, frameWindow, []byte{1}) }, "window frame"},
		{"stream id 0", func(p *rawPeer) { p.request(0, request{Op: opPing}) }, "stream 0"},
		{"window overrun", func(p *rawPeer) {
			p.request(1, request{Op: opExec, Argv: []string{"sleep", "5"}, Stdin: true})
			chunk := make([]byte, DataChunk)
			for range 2*InitialWindow/DataChunk + 4 { // the pipe to sleep takes some
				if p.fw.write(1, frameData, chunk) != nil {
					return
				}
			}
		}, "beyond the window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newRawPeer(t)
			go tt.send(p)
			go io.Copy(io.Discard, p.conn) // keep the server's writes flowing
			select {
			case err := <-p.done:
				p.done <- err // for cleanup
				if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Serve: got %v, want a protocol error containing %q", err, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not drop the connection")
			}
		})
	}
}

// A stream the client abandons (canceled read) ends on the server too.
func TestServerEndsAbandonedStreams(t *testing.T) {
	p := newRawPeer(t)
	// /dev/zero is not a regular file; use a big file instead.
	p.request(1, request{Op: opWrite, Path: "big"})
	chunk := make([]byte, DataChunk)
	for range 8 {
		p.fw.write(1, frameData, chunk)
	}
	p.fw.write(1, frameEOF, nil)
	if r := p.result(1); r.Error != nil || r.Size != 8*DataChunk {
		t.Fatalf("write: got %+v", r)
	}
	p.request(2, request{Op: opRead, Path: "big"}) // more than one window: blocks without credit
	p.fw.write(2, frameCancel, nil)
	r := p.result(2)
	if r.Error == nil || !strings.Contains(r.Error.Message, "canceled") {
		t.Errorf("canceled read: got %+v, want an error result", r)
	}
	var win [4]byte
	binary.BigEndian.PutUint32(win[:], 1)
	p.fw.write(2, frameWindow, win[:]) // late frames for a finished stream are ignored
	p.request(3, request{Op: opPing})
	if r := p.result(3); r.Version != Version {
		t.Errorf("ping after cancel: got %+v", r)
	}
}
