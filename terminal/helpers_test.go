package terminal_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"conch/terminal"
	"conch/terminal/terminaltest"
)

type box = terminaltest.Box

func eachBox(t *testing.T, f func(t *testing.T, b *box)) { terminaltest.Each(t, f) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// mustWait waits and fails the test on an error.
func mustWait(t testing.TB, m *terminal.Manager, timeout time.Duration) terminal.WaitResult {
	t.Helper()
	res, err := m.Wait(ctxT(t), timeout)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return res
}

func obsOf(t testing.TB, res terminal.WaitResult, n int) terminal.Observation {
	t.Helper()
	for _, o := range res.TTYs {
		if o.TTY == n {
			return o
		}
	}
	t.Fatalf("no observation of tty %d in:\n%s", n, res)
	return terminal.Observation{}
}

func mustType(t testing.TB, m *terminal.Manager, n int, expect, text string, enter bool) {
	t.Helper()
	if err := m.Type(ctxT(t), n, expect, text, enter); err != nil {
		t.Fatalf("Type(%d, %q, %q): %v", n, expect, text, err)
	}
}

func contains(t testing.TB, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("%s: got %q, want it to contain %q", what, got, want)
	}
}
