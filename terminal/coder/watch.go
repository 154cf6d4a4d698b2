package coder

import (
	"context"
	"fmt"
	"strings"
	"time"

	"conch/internal/backoff"
)

// watch calls check with the screen whenever the session changed (at most
// every 50 ms) or when check asked to be called again, until check says
// done or ctx ends.
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
			// Let a burst of output (a spinner) land before looking.
			if err := backoff.Sleep(ctx, minGap); err != nil {
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
	lines = trimBlankTail(lines)
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

func trimBlankTail(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// elide shows lines whole when there are at most inline of them, else the
// first head and the last tail with the gap marked.
func elide(lines []string, inline, head, tail int) string {
	if len(lines) <= inline {
		return strings.Join(lines, "\n")
	}
	var b strings.Builder
	b.WriteString(strings.Join(lines[:head], "\n"))
	fmt.Fprintf(&b, "\n[… %d lines not shown …]\n", len(lines)-head-tail)
	b.WriteString(strings.Join(lines[len(lines)-tail:], "\n"))
	return b.String()
}
