package terminal

import (
	"context"
	"errors"
	"slices"
	"testing"

	"conch"
)

// noSandboxes fails the test if anything asks for a sandbox.
type noSandboxes struct{ t *testing.T }

func (n noSandboxes) Sandbox(context.Context, conch.ConversationKey) (conch.Sandbox, error) {
	n.t.Error("the dashboard's terminal list asked for a sandbox (it would start it or keep it from its idle stop)")
	return nil, errors.New("no sandbox")
}

func TestPoolTerminalsFromRegistryWithoutTouchingTheSandbox(t *testing.T) {
	reg := NewMemRegistry()
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: "c1"}
	ctx := context.Background()
	for _, n := range []int{3, 0, CodeTTY} {
		if err := reg.SaveTerminal(ctx, key.String(), Record{TTY: n, Session: sessionName(n)}); err != nil {
			t.Fatal(err)
		}
	}
	p := NewPool(noSandboxes{t}, reg, Options{})
	got, err := p.Terminals(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{CodeTTY, 0, 3}; !slices.Equal(got, want) {
		t.Fatalf("terminals %v, want %v", got, want)
	}
	if n := p.Count(); n != 0 {
		t.Fatalf("count %d with no Manager in use, want 0", n)
	}
}

func TestStripMarkers(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain",
		"a" + oscPrefix + "n0nce;done;0;/tmp\a" + "b":          "ab",
		oscPrefix + "x;start\a" + oscPrefix + "x;done;1;/\a$ ": "$ ",
		"tail " + oscPrefix + "x;do":                           "tail ",
		"\x1b]0;title\a keep other OSC":                        "\x1b]0;title\a keep other OSC",
	} {
		if got := string(stripMarkers([]byte(in))); got != want {
			t.Errorf("stripMarkers(%q) = %q, want %q", in, got, want)
		}
	}
}
