package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"conch"
)

// typingTimeout bounds one SetTyping call.
const typingTimeout = 10 * time.Second

// turnView shows running turns on their channels and runs the post-turn
// hooks. It is an observer of the hub: it learns everything from the
// turns' events (a turn running, its tool calls and progress, its answer,
// its end), never from the worker, so whatever publishes a turn's events
// shows the same way on every channel. It holds conch's one typing renewer
// (each channel says how often its indicator must be shown again) and feeds
// the one progress throttle (progress.go).
//
// observe runs inside the hub's publishing and never blocks: sending,
// typing and hooks happen on goroutines of their own.
type turnView struct {
	g *Gateway

	mu    sync.Mutex
	life  context.Context // Run's lifetime; set before any turn runs
	shown map[conch.ConversationKey]*shownTurn
	// hooks holds each conversation's running post-turn hooks: the next
	// turn of the conversation waits for them (waitHooks).
	hooks map[conch.ConversationKey]chan struct{}
	bg    sync.WaitGroup
}

// shownTurn is a running turn on its channel.
type shownTurn struct {
	turn   conch.TurnID
	prog   *progress
	answer string        // the turn's answer, once published
	stop   func()        // ends the typing renewer, which then clears typing
	typing chan struct{} // closed once typing is cleared
}

func newTurnView(g *Gateway) *turnView {
	return &turnView{g: g, shown: make(map[conch.ConversationKey]*shownTurn), hooks: make(map[conch.ConversationKey]chan struct{})}
}

// start sets the lifetime of what the view runs in the background.
func (v *turnView) start(life context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.life = life
}

// wait waits for the view's background work (bounded by its timeouts).
func (v *turnView) wait() { v.bg.Wait() }

// observe takes one event of the hub.
func (v *turnView) observe(ev conch.Event) {
	switch d := ev.Data.(type) {
	case conch.TurnState:
		switch d.Status {
		case conch.TurnPending:
		case conch.TurnRunning:
			v.begin(ev.Key, ev.Turn)
		default:
			v.end(ev.Key, ev.Turn, d)
		}
		return
	case conch.MessageEvent:
		if d.Role == conch.RoleAssistant {
			v.mu.Lock()
			if st := v.shown[ev.Key]; st != nil && st.turn == ev.Turn {
				st.answer = d.Text
			}
			v.mu.Unlock()
		}
		return
	}
	v.mu.Lock()
	st := v.shown[ev.Key]
	v.mu.Unlock()
	if st != nil && st.turn == ev.Turn {
		st.prog.add(ev.Data)
	}
}

// begin starts showing a running turn: typing, and progress as it comes.
func (v *turnView) begin(key conch.ConversationKey, turn conch.TurnID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old := v.shown[key]; old != nil {
		v.stopLocked(key, old)
	}
	if v.life == nil {
		return
	}
	ctx, cancel := context.WithCancel(v.life)
	st := &shownTurn{turn: turn, prog: newProgress(v.g, key, turn), stop: cancel, typing: make(chan struct{})}
	v.shown[key] = st
	v.bg.Go(func() { v.renewTyping(ctx, key, turn, st.prog.done, st.typing) })
}

// end stops showing a turn that is over, and runs its post-turn hooks.
func (v *turnView) end(key conch.ConversationKey, turn conch.TurnID, state conch.TurnState) {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.shown[key]
	if st == nil || st.turn != turn {
		return
	}
	v.stopLocked(key, st)
	v.afterTurnLocked(key, turn, st.answer, state)
}

// stopLocked ends a shown turn's typing and progress without waiting (what
// progress is pending is still shown).
func (v *turnView) stopLocked(key conch.ConversationKey, st *shownTurn) {
	delete(v.shown, key)
	st.prog.end()
	st.stop()
}

// settle is called before a turn's answer goes out: the turn's progress is
// shown in full and its typing cleared first, so the answer comes last.
func (v *turnView) settle(key conch.ConversationKey, turn conch.TurnID) {
	v.mu.Lock()
	st := v.shown[key]
	if st == nil || st.turn != turn {
		v.mu.Unlock()
		return
	}
	st.prog.end()
	st.stop()
	v.mu.Unlock()
	<-st.typing // after the progress was shown in full (renewTyping)
}

// renewTyping shows the typing indicator until ctx ends, again every
// TypingEvery of the channel, then clears it once the turn's progress was
// shown in full (progressDone): channels read "typing off" as the turn being
// over (Telegram folds its progress message then).
func (v *turnView) renewTyping(ctx context.Context, key conch.ConversationKey, turn conch.TurnID, progressDone <-chan struct{}, done chan struct{}) {
	defer close(done)
	tc, ok := v.g.channels[key.Channel].(conch.TypingChannel)
	// The progress ends with the turn's end; a bounded wait keeps a turn
	// whose end never came from holding Run's shutdown.
	afterProgress := func() {
		select {
		case <-progressDone:
		case <-time.After(2 * progressTimeout):
		}
	}
	if !ok {
		<-ctx.Done()
		afterProgress()
		return
	}
	set := func(on bool) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), typingTimeout)
		defer cancel()
		if err := tc.SetTyping(sctx, key, on); err != nil {
			v.g.log.Debug("typing", "conversation", key, "on", on, "err", err)
		}
	}
	if v.g.submits.wait(ctx, turn) != nil {
		afterProgress()
		return
	}
	set(true)
	var tick <-chan time.Time
	if every := tc.TypingEvery(); every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			afterProgress()
			set(false)
			return
		case <-tick:
			set(true)
		}
	}
}

// wantsPostTurn reports whether a turn that reached state gets post-turn
// hooks: not one interrupted by shutdown (it resumes), reset or closed (it
// is gone) or abandoned.
func wantsPostTurn(state conch.TurnState) bool {
	switch {
	case state.Status == conch.TurnPending, state.Status == conch.TurnRunning, state.Resumes,
		state.Status == conch.TurnAbandoned, state.Reason == errReset.Error(), state.Reason == errClosed.Error():
		return false
	}
	return true
}

// afterTurnLocked runs the post-turn hooks of a turn that ended. They run
// on conch's lifetime, so a /stop does not cut them short; the
// conversation's next turn waits for them. Their HookRan event (published
// even when no hook ran) marks them done in the event log, so hooks that a
// crash kept from running run at the next start (recoverHooks).
func (v *turnView) afterTurnLocked(key conch.ConversationKey, turn conch.TurnID, answer string, state conch.TurnState) {
	hooks := v.g.opts.Hooks
	if hooks == nil || !wantsPostTurn(state) || v.life == nil || v.life.Err() != nil {
		return
	}
	life, prev := v.life, v.hooks[key]
	done := make(chan struct{})
	v.hooks[key] = done
	v.bg.Go(func() {
		defer func() {
			v.mu.Lock()
			if v.hooks[key] == done {
				delete(v.hooks, key)
			}
			v.mu.Unlock()
			close(done)
		}()
		if prev != nil {
			<-prev
		}
		t, err := v.g.opts.Store.Turn(life, turn)
		if err != nil {
			v.g.log.Warn("post-turn hooks: read the turn", "conversation", key, "turn", turn, "err", err)
			return
		}
		normal := state.Status == conch.TurnDone && state.Reason == ""
		if strings.HasPrefix(state.Reason, "error_") {
			answer = "" // the person was told of a failure, not answered
		}
		ran := hooks.AfterTurn(life, t, answer, normal)
		ran.Stage = postTurnStage
		if life.Err() == nil {
			v.g.hub.Publish(life, key, turn, ran)
		}
	})
}

// postTurnStage is the Stage of the post-turn hooks' HookRan event.
const postTurnStage = "post-turn"

// hookScan is how many of a conversation's newest events recoverHooks reads.
const hookScan = 64

// recoverHooks runs the post-turn hooks of turns that ended before a crash
// let their hooks run: in each conversation's newest events, the turns that
// ended after the newest post-turn HookRan. A conversation without such a
// mark among them (a log from before the marks, or one turn of more than
// hookScan events) is left alone: replaying hooks of long-past turns would
// be worse than missing one. Call it before workers run (their turns wait
// for these hooks).
func (v *turnView) recoverHooks(ctx context.Context) error {
	if v.g.opts.Hooks == nil || v.g.opts.Events == nil {
		return nil
	}
	keys, err := v.g.opts.Store.Conversations(ctx)
	if err != nil {
		return fmt.Errorf("post-turn hooks: %w", err)
	}
	for _, key := range keys {
		last, err := v.g.hub.LastSeq(ctx, key)
		if err != nil || last == 0 {
			continue
		}
		evs, err := v.g.opts.Events.EventsSince(ctx, key, max(0, last-hookScan), hookScan)
		if err != nil {
			v.g.log.Warn("post-turn hooks: read events", "conversation", key, "err", err)
			continue
		}
		mark := -1
		for i, ev := range evs {
			if d, ok := ev.Data.(conch.HookRan); ok && d.Stage == postTurnStage {
				mark = i
			}
		}
		if mark < 0 {
			continue
		}
		answers := map[conch.TurnID]string{}
		for _, ev := range evs[mark+1:] {
			switch d := ev.Data.(type) {
			case conch.MessageEvent:
				if d.Role == conch.RoleAssistant {
					answers[ev.Turn] = d.Text
				}
			case conch.TurnState:
				if wantsPostTurn(d) {
					v.g.log.Info("running post-turn hooks a restart kept from running", "conversation", key, "turn", ev.Turn)
					v.mu.Lock()
					v.afterTurnLocked(key, ev.Turn, answers[ev.Turn], d)
					v.mu.Unlock()
				}
			}
		}
	}
	return nil
}

// waitAllHooks waits until no post-turn hooks run (or ctx is done).
func (v *turnView) waitAllHooks(ctx context.Context) error {
	for {
		v.mu.Lock()
		var running chan struct{}
		for _, c := range v.hooks {
			running = c
			break
		}
		v.mu.Unlock()
		if running == nil {
			return nil
		}
		select {
		case <-running:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitHooks waits until the conversation's post-turn hooks have run (or
// ctx is done).
func (v *turnView) waitHooks(ctx context.Context, key conch.ConversationKey) {
	v.mu.Lock()
	done := v.hooks[key]
	v.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}
