// Package registrytest is the contract every terminal.Registry passes; the
// in-memory one and the SQLite one run it. Tests only.
package registrytest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"conch/terminal"
)

// Run checks reg against the Registry contract.
func Run(t *testing.T, reg terminal.Registry) {
	ctx := context.Background()
	opened := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	recs := []terminal.Record{
		{TTY: 2, Session: "tty_2", Command: "python3 -q", OpenedAt: opened, Mark: 7, Seen: []string{">>> 1+1", "2", ">>>"}, Observed: true},
		{TTY: 0, Session: "tty_0", Shell: true, Nonce: "0123abcd", OpenedAt: opened, Mark: -1},
		{TTY: terminal.CodeTTY, Session: "code", Command: "fakecli", Shell: true, OpenedAt: opened, Mark: 0, Seen: []string{"╭─╮", "│ > │"}},
	}
	for _, r := range recs {
		if err := reg.SaveTerminal(ctx, "a", r); err != nil {
			t.Fatalf("SaveTerminal: %v", err)
		}
	}
	if err := reg.SaveTerminal(ctx, "b", terminal.Record{TTY: 0, Session: "tty_0", OpenedAt: opened}); err != nil {
		t.Fatalf("SaveTerminal: %v", err)
	}
	got, err := reg.LoadTerminals(ctx, "a")
	if err != nil {
		t.Fatalf("LoadTerminals: %v", err)
	}
	want := []terminal.Record{recs[2], recs[1], recs[0]}
	want[1].Seen = nil
	if !equal(got, want) {
		t.Fatalf("LoadTerminals: got %+v, want %+v", got, want)
	}
	// An update replaces the record.
	upd := recs[0]
	upd.Mark, upd.Seen, upd.Observed = 9, []string{"new"}, false
	if err := reg.SaveTerminal(ctx, "a", upd); err != nil {
		t.Fatalf("SaveTerminal update: %v", err)
	}
	if err := reg.DeleteTerminal(ctx, "a", 0); err != nil {
		t.Fatalf("DeleteTerminal: %v", err)
	}
	if err := reg.DeleteTerminal(ctx, "a", 11); err != nil {
		t.Fatalf("DeleteTerminal of a missing record: %v", err)
	}
	got, err = reg.LoadTerminals(ctx, "a")
	if err != nil {
		t.Fatalf("LoadTerminals: %v", err)
	}
	if !equal(got, []terminal.Record{recs[2], upd}) {
		t.Fatalf("after update and delete: got %+v", got)
	}
	if got, _ := reg.LoadTerminals(ctx, "b"); len(got) != 1 {
		t.Fatalf("scope b: got %d records, want 1 (scopes are separate)", len(got))
	}
	if got, _ := reg.LoadTerminals(ctx, "none"); len(got) != 0 {
		t.Fatalf("unknown scope: got %d records, want 0", len(got))
	}
}

func equal(a, b []terminal.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.TTY != y.TTY || x.Session != y.Session || x.Command != y.Command || x.Shell != y.Shell || x.Nonce != y.Nonce ||
			!x.OpenedAt.Equal(y.OpenedAt) || x.Mark != y.Mark || x.Observed != y.Observed || fmt.Sprint(nilEmpty(x.Seen)) != fmt.Sprint(nilEmpty(y.Seen)) {
			return false
		}
	}
	return true
}

func nilEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}
