package coder

import (
	"context"
	"strings"
	"time"

	"conch/terminal"
)

// watch calls check with the screen whenever the session changed (at most
// every 50 ms, so that a burst of output lands first) or when check asked
// to be called again, until check says done or ctx ends. A marker (a
// CLI's hook, the shell's prompt) or the program's end is looked at at
// once: it is an event, not output still being drawn.
func (c *Coder) watch(ctx context.Context, check func(screen []string, s snap) (done bool, recheck time.Time, err error)) error {
	const minGap = 50 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lastSeq uint64
	first := true
	for {
		sn, ch := c.s.Snapshot()
		s := snap{Snapshot: sn, dead: sn.Dead || sn.Ended, status: sn.Status}
		var recheck time.Time
		if first || s.Seq != lastSeq {
			screen, err := c.s.Screen(ctx)
			if err != nil {
				return err
			}
			done, at, err := check(screen, s)
			if err != nil || done {
				return err
			}
			recheck = at
			lastSeq, first = s.Seq, false
		}
		wait := time.Hour
		if !recheck.IsZero() {
			wait = max(recheck.Sub(c.o.Now()), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ch:
			// Let a burst of output (a spinner) land before looking,
			// unless a marker comes meanwhile.
			if err := c.gap(ctx, sn, minGap); err != nil {
				return err
			}
		case <-timer.C:
			first = true
		case <-ctx.Done():
			return ctx.Err()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// gap waits d, or less when a marker comes (or the program or its stream
// ends) after the snapshot sn.
func (c *Coder) gap(ctx context.Context, sn terminal.Snapshot, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		now, next := c.s.Snapshot()
		if marked(sn, now) {
			return nil
		}
		select {
		case <-next:
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// marked reports whether a marker came, or the program or its stream
// ended, between the snapshots before and now.
func marked(before, now terminal.Snapshot) bool {
	return now.TurnSeq != before.TurnSeq || now.DoneSeq != before.DoneSeq || now.ReadySeq != before.ReadySeq ||
		now.Dead != before.Dead || now.Ended != before.Ended
}

func hasAny(lines []string, markers []string) bool {
	for _, l := range lines {
		for _, m := range markers {
			if m != "" && strings.Contains(l, m) {
				return true
			}
		}
	}
	return false
}

func tailLines(lines []string, n int) []string {
	lines = terminal.TrimBlankTail(lines)
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}
