package docker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/moby/moby/client"
)

// Stream kinds in the engine's multiplexed exec output (no TTY): each frame
// has an 8-byte header [kind, 0, 0, 0, size (big-endian uint32)].
const (
	streamStdin  = 0
	streamStdout = 1
	streamStderr = 2
	streamSystem = 3
)

// demux reads a multiplexed exec output stream. Read returns stdout bytes
// only; stderr frames are copied to Stderr (when set) as they pass.
type demux struct {
	src    io.Reader
	stderr io.Writer // may be nil
	kind   byte
	left   int // bytes left in the current frame
	hdr    [8]byte
}

func (d *demux) Read(p []byte) (int, error) {
	for {
		if d.left == 0 {
			if _, err := io.ReadFull(d.src, d.hdr[:]); err != nil {
				if errors.Is(err, io.ErrUnexpectedEOF) {
					return 0, fmt.Errorf("exec stream: truncated frame header: %w", err)
				}
				return 0, err
			}
			d.kind = d.hdr[0]
			d.left = int(binary.BigEndian.Uint32(d.hdr[4:]))
			if d.kind > streamSystem {
				return 0, fmt.Errorf("exec stream: unknown frame kind %d (is the exec attached to a TTY?)", d.kind)
			}
			continue
		}
		switch d.kind {
		case streamStdout:
			n := min(len(p), d.left)
			n, err := d.src.Read(p[:n])
			d.left -= n
			if err == io.EOF && d.left > 0 {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		default:
			w := d.stderr
			if w == nil || d.kind != streamStderr {
				w = io.Discard
			}
			n, err := io.CopyN(w, d.src, int64(d.left))
			d.left -= int(n)
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return 0, fmt.Errorf("exec stream: %w", err)
			}
		}
	}
}

// execConn is one attached exec as a plain io.ReadWriteCloser: Write feeds
// the process's stdin, Read returns its stdout (stderr goes elsewhere),
// CloseWrite closes stdin, Close drops the connection (and so the process's
// stdin; a well-behaved process then exits).
type execConn struct {
	hr     client.HijackedResponse
	r      *demux
	wmu    sync.Mutex
	once   sync.Once
	ExecID string
}

func newExecConn(hr client.HijackedResponse, execID string, stderr io.Writer) *execConn {
	return &execConn{hr: hr, r: &demux{src: hr.Reader, stderr: stderr}, ExecID: execID}
}

func (c *execConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *execConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.hr.Conn.Write(p)
}

// CloseWrite closes the process's stdin and keeps reading possible.
func (c *execConn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.hr.CloseWrite()
}

func (c *execConn) Close() error {
	c.once.Do(c.hr.Close)
	return nil
}

var _ io.ReadWriteCloser = (*execConn)(nil)
