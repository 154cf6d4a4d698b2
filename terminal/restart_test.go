package terminal_test

import (
	"strings"
	"testing"
	"time"

	"conch"
	"conch/terminal"
)

// TestRestartKeepsObservedMark: after a restart of conch (a new Pool over
// the same registry and the same live sandbox), a terminal the model had
// fully observed and that has not changed takes input at once; the first
// terminal_type is not refused for output nobody can see (issue #9).
func TestRestartKeepsObservedMark(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		reg := terminal.NewMemRegistry()
		key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "restart"}
		pool1 := terminal.NewPool(oneProvider{b.SB}, reg, b.Opts)
		m1, err := pool1.Manager(ctx, key)
		if err != nil {
			t.Fatalf("Manager: %v", err)
		}
		if _, err := m1.Open(ctx, ""); err != nil {
			t.Fatalf("Open: %v", err)
		}
		mustType(t, m1, 0, "bash", "echo before-restart", true)
		if o := obsOf(t, mustWait(t, m1, 10*time.Second), 0); o.State != terminal.StateDone {
			t.Fatalf("before the restart: got %s, want done\n%s", o.State, o)
		}
		pool1.Close() // conch stops; the terminal lives on, unchanged

		pool2 := terminal.NewPool(oneProvider{b.SB}, reg, b.Opts)
		t.Cleanup(pool2.Close)
		m2, err := pool2.Manager(ctx, key)
		if err != nil {
			t.Fatalf("Manager after the restart: %v", err)
		}
		if err := m2.Type(ctx, 0, "bash", "echo after-restart", true); err != nil {
			t.Fatalf("first Type after the restart into an unchanged, observed terminal: got %v, want it typed", err)
		}
		o := obsOf(t, mustWait(t, m2, 10*time.Second), 0)
		if o.State != terminal.StateDone {
			t.Fatalf("after the restart: got %s, want done\n%s", o.State, o)
		}
		contains(t, "after the restart", o.Text, "\nafter-restart\n")
		if strings.Contains(o.Text, "before-restart") {
			t.Errorf("after the restart: output seen before the restart shown again:\n%s", o.Text)
		}
	})
}
