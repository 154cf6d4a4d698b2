package gateway

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"conch"
)

// command is a parsed slash command.
type command struct {
	name string
	args string
}

var commandRE = regexp.MustCompile(`^/([a-z]+)(?:\s+(.*))?$`)

// commands are the names handled by the gateway. Anything else that starts
// with a slash ("/tmp is full", a Matrix emote "/me waves") is a message.
var commands = map[string]bool{"stop": true, "reset": true, "status": true, "usage": true, "help": true}

// parseCommand recognises "/name args" for a known name.
func parseCommand(text string) (command, bool) {
	m := commandRE.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil || !commands[m[1]] {
		return command{}, false
	}
	return command{name: m[1], args: m[2]}, true
}

const helpText = `Commands:
/stop — stop what I am doing now (queued messages stay queued)
/reset — forget this conversation and remove its computer
/status — what I am doing, what is queued, the state of the computer
/usage — what this conversation, you and everyone used today, and the limits
/help — this list
Anything else is a message to me.`

// command answers a slash command at once, outside the queue, so /stop and
// /status work while a turn runs.
func (g *Gateway) command(ctx context.Context, in conch.Inbound, cmd command) error {
	g.log.Info("command", "conversation", in.Key, "sender", in.Sender, "command", cmd.name)
	var text string
	switch cmd.name {
	case "help":
		text = helpText
	case "stop":
		if g.conv(in.Key).cancelCurrent(ctx, errStopped) {
			text = "Stopped."
		} else {
			text = "Nothing is running."
		}
	case "reset":
		var err error
		if text, err = g.reset(ctx, in.Key); err != nil {
			return err
		}
	case "status":
		text = g.status(ctx, in.Key)
	case "usage":
		text = "Usage is not counted here."
		if g.opts.Usage != nil {
			text = g.opts.Usage.Report(ctx, in.Key, conch.UserKey{Channel: in.Key.Channel, ID: in.Sender})
		}
	}
	g.send(ctx, 0, conch.Outbound{Key: in.Key, Kind: conch.OutboundNotice, Text: text, InReplyTo: in.ExternalID, Thread: in.Thread})
	return nil
}

// conv returns the conversation object for key, creating an idle one.
func (g *Gateway) conv(key conch.ConversationKey) *conversation {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.convs[key]
	if c == nil {
		c = &conversation{g: g, key: key}
		g.convs[key] = c
	}
	return c
}

// reset forgets the conversation: running and queued turns end, history is
// hidden, the sandbox is removed.
func (g *Gateway) reset(ctx context.Context, key conch.ConversationKey) (string, error) {
	// Under the conversation's submission lock: a message being stored
	// (perhaps with its turn started) is queued before the reset ends it.
	unlock := g.order.lock(key)
	g.conv(key).close(errReset)
	err := g.opts.Store.ResetConversation(ctx, key)
	unlock()
	if err != nil {
		return "", fmt.Errorf("reset %s: %w", key, err)
	}
	g.forgetApprovals(ctx, key)
	text := "Conversation reset: I have forgotten it."
	if err := g.release(ctx, key); err != nil {
		g.log.Error("release conversation on reset", "conversation", key, "err", err)
		return text + " Removing its computer failed; the operator has been told in the logs.", nil
	}
	if g.opts.Runtime != nil {
		text = "Conversation reset: I have forgotten it and removed its computer."
	}
	return text, nil
}

// contextStatuser is an optional ability of the Store: how full the model's
// context is, for /status.
type contextStatuser interface {
	ContextStatus(ctx context.Context, key conch.ConversationKey) (conch.ContextStatus, error)
}

// status describes the conversation's state.
func (g *Gateway) status(ctx context.Context, key conch.ConversationKey) string {
	var b strings.Builder
	g.mu.Lock()
	c := g.convs[key]
	var cur *running
	queued := 0
	if c != nil {
		cur, queued = c.cur, len(c.queue)
	}
	g.mu.Unlock()
	if cur != nil {
		fmt.Fprintf(&b, "Working on “%s” for %s (attempt %d of %d).",
			clip(cur.turn.Inbound.Text, 60), g.opts.Now().Sub(cur.started).Round(time.Second), cur.attempt, g.opts.MaxAttempts)
	} else {
		b.WriteString("Idle.")
	}
	if queued > 0 {
		fmt.Fprintf(&b, " %d message(s) queued.", queued)
	}
	switch rt := g.opts.Runtime.(type) {
	case nil:
		b.WriteString("\nComputer: none (no container runtime configured).")
	case conch.SandboxAdmin:
		b.WriteString("\n" + SandboxStatus(ctx, rt, key, g.opts.Now(), g.log))
	}
	if cs, ok := g.opts.Store.(contextStatuser); ok {
		if st, err := cs.ContextStatus(ctx, key); err == nil && (st.Tokens > 0 || st.Compactions > 0) {
			b.WriteString("\n" + st.String())
		}
	}
	if g.opts.Usage != nil {
		if line := g.opts.Usage.Status(ctx, key); line != "" {
			b.WriteString("\n" + line)
		}
	}
	for _, src := range g.opts.StatusSources {
		for _, line := range src.Status(ctx, key) {
			b.WriteString("\n" + line)
		}
	}
	if sc, ok := g.channels[key.Channel].(conch.StatusChannel); ok {
		for _, line := range sc.Status(ctx, key) {
			b.WriteString("\n" + line)
		}
	}
	return b.String()
}
