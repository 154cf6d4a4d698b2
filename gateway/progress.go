package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"conch"
)

// maxProgressLines bounds an edited-in-place progress message.
const maxProgressLines = 12

// progress shows a turn's events on its channel: edited in place where the
// channel can edit, otherwise as messages. It is conch's one progress
// throttle: at most one update per interval, coalescing what arrives in
// between. Sending happens on its own goroutine, never under its lock, so a
// slow channel holds up neither the turn nor the hub.
type progress struct {
	g        *Gateway
	key      conch.ConversationKey
	turn     conch.TurnID
	ch       conch.Channel
	editing  conch.EditingChannel
	interval time.Duration

	// inReplyTo and thread place progress messages: the turn's message,
	// read from the store before the first one is sent.
	inReplyTo string
	thread    conch.Thread
	placed    bool

	mu      sync.Mutex
	lines   []string // the window shown (editing) or the lines not yet sent
	pending bool     // lines changed since the last send
	closed  bool
	wake    chan struct{} // something to show
	stop    chan struct{} // closed by close
	done    chan struct{} // closed when run returned
}

func newProgress(g *Gateway, key conch.ConversationKey, turn conch.TurnID) *progress {
	p := &progress{g: g, key: key, turn: turn, ch: g.channels[key.Channel], interval: g.opts.ProgressInterval,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	p.editing, _ = p.ch.(conch.EditingChannel)
	if p.editing != nil {
		p.interval = g.opts.EditInterval
	}
	go p.run()
	return p
}

// progressLine is how an event reads in a progress message; "" for events
// that are not shown there.
func progressLine(d conch.EventData) string {
	switch e := d.(type) {
	case conch.ToolStarted:
		return "⚙ " + e.Summary
	case conch.RetryEvent:
		return fmt.Sprintf("↻ model unavailable (%s), retrying in %s (retry %d of %d)", e.Reason, e.Delay.Round(time.Millisecond), e.Attempt, e.Max)
	case conch.ToolProgress:
		return e.Text
	case conch.HookRan:
		switch {
		case len(e.Issues) > 0:
			return fmt.Sprintf("⚑ %s hooks: %d open issue(s) to address", e.Stage, len(e.Issues))
		case len(e.Failed) > 0:
			return fmt.Sprintf("⚑ %s hook failed: %s", e.Stage, strings.Join(e.Failed, ", "))
		}
	}
	return ""
}

// add takes one event of the turn.
func (p *progress) add(d conch.EventData) {
	line := progressLine(d)
	if line == "" || p.ch == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.lines = append(p.lines, line)
	if p.editing != nil && len(p.lines) > maxProgressLines {
		p.lines = p.lines[len(p.lines)-maxProgressLines:]
	}
	p.pending = true
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run sends updates until close, then what is still pending.
func (p *progress) run() {
	defer close(p.done)
	var last time.Time
	var ref *conch.MessageRef
	for {
		select {
		case <-p.wake:
		case <-p.stop:
		}
		// The interval holds for the last update too: channels limit edits
		// (a Telegram chat about one a second), so the answer may wait for
		// up to one interval behind a pending line.
		if wait := p.interval - p.g.opts.Now().Sub(last); !last.IsZero() && wait > 0 {
			p.mu.Lock()
			pending := p.pending
			p.mu.Unlock()
			if pending {
				time.Sleep(wait)
			}
		}
		p.mu.Lock()
		text, ok, closed := p.takeLocked()
		p.mu.Unlock()
		if ok {
			last = p.g.opts.Now()
			ref = p.send(text, ref)
		}
		if closed {
			return
		}
	}
}

// takeLocked returns the text to send now, if any.
func (p *progress) takeLocked() (text string, ok, closed bool) {
	closed = p.closed
	if !p.pending {
		return "", false, closed
	}
	p.pending = false
	text = strings.Join(p.lines, "\n")
	if p.editing == nil {
		p.lines = nil
	}
	return text, true, closed
}

// send shows text: an edit of the message at ref, or a new message.
func (p *progress) send(text string, ref *conch.MessageRef) *conch.MessageRef {
	// Progress is best effort: bounded, and never the turn's business.
	ctx, cancel := context.WithTimeout(context.Background(), progressTimeout)
	defer cancel()
	if err := p.g.submits.wait(ctx, p.turn); err != nil {
		return ref
	}
	if !p.placed {
		p.placed = true
		if t, err := p.g.opts.Store.Turn(ctx, p.turn); err == nil {
			p.inReplyTo, p.thread = t.Inbound.ExternalID, t.Inbound.Thread
		} else {
			p.g.log.Debug("progress: read the turn", "conversation", p.key, "turn", p.turn, "err", err)
		}
	}
	out := conch.Outbound{Key: p.key, Kind: conch.OutboundProgress, Text: text, InReplyTo: p.inReplyTo, Thread: p.thread}
	if p.editing != nil {
		if ref != nil {
			if err := p.editing.Edit(ctx, *ref, text); err == nil {
				return ref
			}
		}
		r, err := p.editing.SendEditable(ctx, out)
		if err != nil {
			p.g.log.Debug("progress not delivered", "conversation", p.key, "err", err)
			return ref
		}
		return &r
	}
	if err := p.ch.Send(ctx, out); err != nil {
		p.g.log.Debug("progress not delivered", "conversation", p.key, "err", err)
	}
	return nil
}

// end stops further progress without waiting; what is pending is still
// shown, and done is closed once it was (the turn view waits for it before
// the answer, so a coalesced line is never lost before the answer).
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	close(p.stop)
}
