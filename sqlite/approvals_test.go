package sqlite

import (
	"context"
	"testing"
	"time"

	"conch"
)

// TestApprovals: a question is stored once per tool call (asking again
// returns it), decided once (the first decision wins), used and shown once;
// the open ones are listed per conversation and for all; grants are per
// conversation and scope, and cleared.
func TestApprovals(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := conch.ConversationKey{Channel: conch.ChannelTelegram, ID: "42"}
	now := time.UnixMilli(1_800_000_000_000).UTC()
	q := conch.Approval{ID: "a1b2c3d4", Key: key, Turn: 7, CallID: "call_1", Created: now, Deadline: now.Add(time.Minute),
		Request: conch.ApprovalRequest{Kind: "command", Title: "git push", Scope: "command:git push *", Resumable: true}}
	got, created, err := d.AddApproval(ctx, q)
	if err != nil || !created || got.Status != conch.ApprovalOpen || got.Request != q.Request || !got.Deadline.Equal(q.Deadline) {
		t.Fatalf("add: %+v %v %v", got, created, err)
	}
	again := q
	again.ID = "ffffffff"
	if got, created, err := d.AddApproval(ctx, again); err != nil || created || got.ID != "a1b2c3d4" {
		t.Fatalf("the same call asking again: %+v %v %v", got, created, err)
	}
	if _, _, err := d.AddApproval(ctx, conch.Approval{ID: "x", Key: key}); conch.KindOf(err) != conch.KindInvalid {
		t.Fatalf("no turn: %v", err)
	}
	open, err := d.OpenApprovals(ctx, key)
	if err != nil || len(open) != 1 {
		t.Fatalf("open: %v %v", open, err)
	}
	if all, _ := d.OpenApprovals(ctx, conch.ConversationKey{}); len(all) != 1 {
		t.Fatalf("all open: %v", all)
	}
	if other, _ := d.OpenApprovals(ctx, conch.ConversationKey{Channel: conch.ChannelTelegram, ID: "43"}); len(other) != 0 {
		t.Fatalf("another conversation's: %v", other)
	}
	dec, decided, err := d.DecideApproval(ctx, "a1b2c3d4", conch.ApprovalDecision{Choice: conch.ApproveOnce, Reason: conch.ApprovalReasonPerson, By: "alice"}, now)
	if err != nil || !decided || dec.Status != conch.ApprovalDecided || dec.By != "alice" || dec.Choice != conch.ApproveOnce {
		t.Fatalf("decide: %+v %v %v", dec, decided, err)
	}
	dec, decided, err = d.DecideApproval(ctx, "a1b2c3d4", conch.ApprovalDecision{Choice: conch.ApproveDeny, Reason: conch.ApprovalReasonTimeout}, now)
	if err != nil || decided || dec.Choice != conch.ApproveOnce {
		t.Fatalf("a second decision: %+v %v %v", dec, decided, err)
	}
	if _, _, err := d.DecideApproval(ctx, "nope", conch.ApprovalDecision{Choice: conch.ApproveDeny}, now); conch.KindOf(err) != conch.KindNotFound {
		t.Fatalf("unknown: %v", err)
	}
	if err := d.UseApproval(ctx, "a1b2c3d4", now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := d.ApprovalShown(ctx, "a1b2c3d4", now); err != nil {
		t.Fatal(err)
	}
	byCall, err := d.TurnApprovals(ctx, 7)
	if err != nil || byCall["call_1"].Used.IsZero() || byCall["call_1"].Shown.IsZero() || byCall["call_1"].Decided.IsZero() {
		t.Fatalf("turn approvals: %+v %v", byCall, err)
	}
	if open, _ := d.OpenApprovals(ctx, key); len(open) != 0 {
		t.Fatalf("open after the decision: %v", open)
	}
	if _, err := d.Approval(ctx, "nope"); conch.KindOf(err) != conch.KindNotFound {
		t.Fatalf("unknown approval: %v", err)
	}

	if ok, _ := d.Granted(ctx, key, "command:git push *"); ok {
		t.Fatal("granted before a grant")
	}
	if err := d.Grant(ctx, key, "command:git push *", now); err != nil {
		t.Fatal(err)
	}
	if err := d.Grant(ctx, key, "command:git push *", now); err != nil {
		t.Fatalf("granting twice: %v", err)
	}
	if ok, _ := d.Granted(ctx, key, "command:git push *"); !ok {
		t.Fatal("not granted")
	}
	if ok, _ := d.Granted(ctx, conch.ConversationKey{Channel: conch.ChannelTelegram, ID: "43"}, "command:git push *"); ok {
		t.Fatal("a grant leaked to another conversation")
	}
	if err := d.ClearGrants(ctx, key); err != nil {
		t.Fatal(err)
	}
	if ok, _ := d.Granted(ctx, key, "command:git push *"); ok {
		t.Fatal("granted after ClearGrants")
	}
}
