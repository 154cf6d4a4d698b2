package terminal

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"conch"
)

// Terminals lists the open terminal numbers of the conversation's sandbox
// (the coding agent's is CodeTTY), for the dashboard. It neither starts nor
// touches the sandbox (a dashboard left open must not keep sandboxes from
// their idle stop): the Manager in use answers, else the registry.
func (p *Pool) Terminals(ctx context.Context, key conch.ConversationKey) ([]int, error) {
	p.mu.Lock()
	e := p.m[key]
	p.mu.Unlock()
	if e != nil && e.mu.TryLock() {
		m := e.mgr
		e.mu.Unlock()
		if m != nil {
			return m.List(), nil
		}
	}
	recs, err := p.reg.LoadTerminals(ctx, key.String())
	if err != nil {
		return nil, fmt.Errorf("terminals of %s: %w", key, err)
	}
	ns := make([]int, 0, len(recs))
	for _, r := range recs {
		ns = append(ns, r.TTY)
	}
	slices.Sort(ns)
	return ns, nil
}

// FollowTerminal follows terminal n of the conversation: see Manager.Follow.
func (p *Pool) FollowTerminal(ctx context.Context, key conch.ConversationKey, n int, size func(cols, rows int), out func([]byte)) error {
	m, err := p.Manager(ctx, key)
	if err != nil {
		return err
	}
	return m.Follow(ctx, n, size, out)
}

// Follow watches terminal n without touching it: a read-only tmux control
// client of its own (it neither types nor resizes, so the model's view is
// not disturbed) reports the pane's size to size, its current screen (ANSI
// colours included, cursor placed) to out, and then the output as tmux
// pushes it, until ctx is done (nil) or the terminal ends.
//
// out is called from the client's reader: it must not block for long.
// Output that arrives while the screen is captured is in the capture; a
// redraw by the program repairs the rare byte lost between the two.
func (m *Manager) Follow(ctx context.Context, n int, size func(cols, rows int), out func([]byte)) error {
	m.mu.Lock()
	t := m.ttys[n]
	var name, pane string
	if t != nil {
		name, pane = t.name, t.pane
	}
	m.mu.Unlock()
	if t == nil {
		return conch.Errorf(conch.KindNotFound, "no terminal %d", n)
	}
	if pane == "" {
		pane = name
	}
	ev := &followEvents{out: out, done: make(chan struct{})}
	args := append(m.tmuxArgs(), "-C", "attach-session", "-f", "read-only,ignore-size,no-output", "-t", name)
	cc, err := startControl(ctx, m.sb, m.env(), m.o.Workspace, args, ev)
	if err != nil {
		return fmt.Errorf("follow terminal %d: %w", n, err)
	}
	defer cc.close()
	target := quote(pane)
	// Output is off until the screen is captured (no-output above), then
	// turned on in the same batch: nothing is lost or shown twice between
	// the capture and the first pushed output. (refresh-client -A pane:on
	// does not override no-output in tmux 3.3; clearing the flag does.)
	lines, err := cc.command(ctx,
		"display-message -p -t "+target+" '#{pane_id} #{pane_width} #{pane_height} #{cursor_x} #{cursor_y}'",
		"capture-pane -p -e -t "+target,
		"refresh-client -f "+quote("!no-output"))
	if err != nil {
		if isNoSuchSession(err) {
			return conch.Errorf(conch.KindNotFound, "terminal %d has ended", n)
		}
		return fmt.Errorf("follow terminal %d: %w", n, err)
	}
	if len(lines) == 0 {
		return fmt.Errorf("follow terminal %d: tmux told nothing", n)
	}
	f := strings.Fields(lines[0])
	if len(f) != 5 {
		return fmt.Errorf("follow terminal %d: unexpected pane info %q", n, lines[0])
	}
	ev.pane.Store(&f[0])
	num := func(s string) int { v, _ := strconv.Atoi(s); return v }
	cols, rows, cx, cy := num(f[1]), num(f[2]), num(f[3]), num(f[4])
	size(cols, rows)
	screen := lines[1:]
	if len(screen) > rows {
		screen = screen[:rows]
	}
	var b bytes.Buffer
	b.WriteString("\x1b[0m\x1b[H\x1b[2J")
	for i, l := range screen {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString(l)
	}
	fmt.Fprintf(&b, "\x1b[0m\x1b[%d;%dH", cy+1, cx+1)
	ev.live(b.Bytes())
	select {
	case <-ctx.Done():
		return nil
	case <-ev.done:
		return nil
	}
}

// followEvents forwards one pane's output.
type followEvents struct {
	out  func([]byte)
	pane atomic.Pointer[string]
	mu   sync.Mutex
	on   bool
	held []heldOutput // output before the screen was sent
	once sync.Once
	done chan struct{}
}

// live sends the screen, then whatever came after it was captured.
func (e *followEvents) live(screen []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.out(screen)
	for _, h := range e.held {
		if p := e.pane.Load(); p != nil && *p == h.pane {
			e.out(h.data)
		}
	}
	e.held, e.on = nil, true
}

type heldOutput struct {
	pane string
	data []byte
}

func (e *followEvents) output(pane string, data []byte) {
	data = stripMarkers(data)
	if len(data) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.on {
		e.held = append(e.held, heldOutput{pane, data})
		return
	}
	if p := e.pane.Load(); p != nil && *p == pane {
		e.out(data)
	}
}

func (e *followEvents) renamed(string, string) {}

func (e *followEvents) subscription(string, string) {}

func (e *followEvents) ended(error) { e.once.Do(func() { close(e.done) }) }

// stripMarkers removes conch's completion markers (they carry the
// terminal's secret) from output shown to a person.
func stripMarkers(data []byte) []byte {
	for {
		i := bytes.Index(data, []byte(oscPrefix))
		if i < 0 {
			return data
		}
		j := bytes.IndexByte(data[i:], oscEnd)
		if j < 0 {
			return data[:i]
		}
		data = append(data[:i:i], data[i+j+1:]...)
	}
}

// Count is the number of open terminals in the conversations the Pool holds
// (for metrics). It creates nothing; a Manager being created is skipped.
func (p *Pool) Count() int {
	p.mu.Lock()
	es := make([]*poolEntry, 0, len(p.m))
	for _, e := range p.m {
		es = append(es, e)
	}
	p.mu.Unlock()
	n := 0
	for _, e := range es {
		if !e.mu.TryLock() {
			continue
		}
		if e.mgr != nil {
			n += len(e.mgr.List())
		}
		e.mu.Unlock()
	}
	return n
}
