package gateway

import (
	"context"
	"strings"
	"sync"
	"time"

	"conch"
	"conch/agent"
)

// maxProgressLines bounds an edited-in-place progress message.
const maxProgressLines = 12

// progress forwards a turn's progress events to its channel: edited in place
// where the channel can edit, otherwise as messages at most one per
// ProgressInterval, coalescing what arrives in between.
type progress struct {
	g    *Gateway
	key  conch.ConversationKey
	turn conch.Turn

	mu      sync.Mutex
	lines   []string // shown (editing) or pending (not editing)
	ref     *conch.MessageRef
	last    time.Time
	timer   *time.Timer
	closed  bool
	editing conch.EditingChannel
}

func newProgress(g *Gateway, key conch.ConversationKey, t conch.Turn) *progress {
	p := &progress{g: g, key: key, turn: t}
	p.editing, _ = g.channels[key.Channel].(conch.EditingChannel)
	return p
}

func (p *progress) event(ev agent.Event) {
	var line string
	switch ev.Kind {
	case agent.EventToolCall:
		line = "⚙ " + ev.Text
	case agent.EventRetry:
		line = "↻ " + ev.Text
	default:
		line = ev.Text
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
	wait := p.g.opts.ProgressInterval - p.g.opts.Now().Sub(p.last)
	if wait <= 0 {
		p.flushLocked()
		return
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(wait, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.timer = nil
			if !p.closed {
				p.flushLocked()
			}
		})
	}
}

// flushLocked shows the pending lines. Called with p.mu held; sending
// happens under the lock so messages keep their order.
func (p *progress) flushLocked() {
	if len(p.lines) == 0 {
		return
	}
	// Progress is best effort: a slow channel must not hold up the turn
	// (this runs on the agent's goroutine) for long.
	ctx, cancel := context.WithTimeout(context.Background(), progressTimeout)
	defer cancel()
	p.last = p.g.opts.Now()
	text := strings.Join(p.lines, "\n")
	out := conch.Outbound{Key: p.key, Kind: conch.OutboundProgress, Text: text, InReplyTo: p.turn.Inbound.ExternalID, Thread: p.turn.Inbound.Thread}
	if p.editing != nil {
		if p.ref != nil {
			if err := p.editing.Edit(ctx, *p.ref, text); err == nil {
				return
			}
		}
		ref, err := p.editing.SendEditable(ctx, out)
		if err == nil {
			p.ref = &ref
			return
		}
		p.g.log.Debug("progress not delivered", "conversation", p.key, "err", err)
		return
	}
	p.lines = nil
	if err := p.g.channels[p.key.Channel].Send(ctx, out); err != nil {
		p.g.log.Debug("progress not delivered", "conversation", p.key, "err", err)
	}
}

// close stops further progress and shows what is still pending, so a
// coalesced line (a retry, a tool call) is never lost before the answer.
func (p *progress) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
		p.flushLocked()
	}
}
