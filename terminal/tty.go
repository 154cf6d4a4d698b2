package terminal

import (
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"strings"
	"sync"
	"time"
)

// tty is one terminal: a tmux session with one pane. Fields after opMu are
// guarded by Manager.mu.
type tty struct {
	n        int
	name     string
	command  string
	shell    bool
	profile  string // coding-agent profile name, for CodeTTY
	openedAt time.Time
	// scan.nonce is the terminal's secret: only markers carrying it count.

	// opMu serialises command sequences on the terminal (type, observe,
	// close); waiting for output does not hold it.
	opMu sync.Mutex

	cc     *control
	pane   string
	window string
	ended  bool // the control client's stream ended

	scan       markerScanner
	seq        uint64 // counts events: output, markers, types
	lastOutput time.Time
	lastType   time.Time
	typeSeq    uint64 // seq of the last Type
	unseen     bool   // output since the last observation
	obsSeq     uint64 // seq at the last observation
	recovered  bool   // found by Recover, not observed since

	busy     bool   // a start marker came after the last done
	doneSeq  uint64 // seq of the last done marker
	status   int    // exit status of the last command (done marker)
	cwd      string
	turnSeq  uint64 // seq of the last turn-end marker (coding agent)
	readySeq uint64 // seq of the last session-start marker (coding agent)
	paste    pasteScanner
	pasteOn  bool   // the program switched bracketed paste on
	pasteSeq uint64 // seq when it last did
	turns    int
	exited   bool // exit marker seen
	exitCode int
	dead     bool // tmux says the pane's process is gone
	current  string

	mark int      // absolute line where the last observation began
	seen []string // what the lines from mark showed then

	followers map[*follower]struct{} // see follow.go
}

// ttyEvents feeds a control client's events into the Manager's state.
type ttyEvents struct {
	m *Manager
	t *tty
}

func (e *ttyEvents) output(_ string, data []byte) {
	m, t := e.m, e.t
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.o.Now()
	t.seq++
	t.lastOutput = now
	t.unseen = true
	for f := range t.followers {
		f.feedLocked(data)
	}
	for _, mk := range t.scan.scan(data) {
		t.seq++
		switch mk.kind {
		case "start":
			t.busy = true
		case "done":
			t.busy = false
			t.doneSeq = t.seq
			t.status = mk.status
			t.cwd = mk.arg
		case "exit":
			t.exited = true
			t.exitCode = mk.status
		case "turn":
			t.turnSeq = t.seq
			t.turns++
		case "ready":
			t.readySeq = t.seq
		}
	}
	switch t.paste.scan(data) {
	case 1:
		t.seq++
		t.pasteOn, t.pasteSeq = true, t.seq
	case -1:
		t.seq++
		t.pasteOn = false
	}
	m.notifyLocked()
}

func (e *ttyEvents) renamed(window, name string) {
	m, t := e.m, e.t
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.window != "" && window != t.window {
		return
	}
	if base, ok := strings.CutSuffix(name, "[dead]"); ok {
		t.dead = true
		t.current = base
	} else {
		t.current = name
	}
	t.seq++
	m.notifyLocked()
}

func (e *ttyEvents) subscription(name, value string) {
	if name != deadSubscription || value != "1" {
		return
	}
	m, t := e.m, e.t
	m.mu.Lock()
	defer m.mu.Unlock()
	if !t.dead {
		t.dead = true
		t.seq++
		m.notifyLocked()
	}
}

func (e *ttyEvents) ended(error) {
	m, t := e.m, e.t
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.cc != nil {
		t.ended = true
	}
	m.notifyLocked()
}

// doneLocked reports whether a shell's prompt came back after the last Type.
func (t *tty) doneLocked() bool {
	return t.shell && t.doneSeq > t.typeSeq && !t.busy
}

func fsMode(m uint32) fs.FileMode { return fs.FileMode(m) }

// newNonce returns a fresh terminal secret.
func newNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
