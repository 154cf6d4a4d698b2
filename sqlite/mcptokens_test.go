package sqlite

import (
	"context"
	"testing"
	"time"

	"conch"
)

// MCP tokens: stored with their conversation and expiry, listed oldest
// first, touched, revoked at once, and pruned by the janitor once expired
// (a token without expiry never is).
func TestMCPTokens(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "work"}
	toks := []conch.MCPToken{
		{ID: "a", SecretHash: "ha", Conversation: key, Label: "laptop", CreatedAt: now},
		{ID: "b", SecretHash: "hb", Conversation: key, CreatedAt: now.Add(time.Second), ExpiresAt: now.Add(time.Hour)},
	}
	for _, tok := range toks {
		if err := d.CreateMCPToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.CreateMCPToken(ctx, toks[0]); err == nil {
		t.Error("a second token with the same id was stored")
	}
	if err := d.CreateMCPToken(ctx, conch.MCPToken{ID: "c", SecretHash: "h"}); conch.KindOf(err) != conch.KindInvalid {
		t.Errorf("a token without a conversation: got %v, want KindInvalid", err)
	}
	got, ok, err := d.MCPToken(ctx, "a")
	if err != nil || !ok || got.SecretHash != "ha" || got.Conversation != key || got.Label != "laptop" || !got.CreatedAt.Equal(now) || !got.ExpiresAt.IsZero() || !got.LastUsed.IsZero() {
		t.Fatalf("token a: got %+v %v %v", got, ok, err)
	}
	if _, ok, err := d.MCPToken(ctx, "nope"); ok || err != nil {
		t.Fatalf("unknown token: got %v %v, want none", ok, err)
	}
	if err := d.TouchMCPToken(ctx, "a", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	list, err := d.MCPTokens(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "a" || list[1].ID != "b" {
		t.Fatalf("list: got %+v %v, want a then b", list, err)
	}
	if !list[0].LastUsed.Equal(now.Add(time.Minute)) || !list[1].ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("list: got last used %v and expiry %v", list[0].LastUsed, list[1].ExpiresAt)
	}
	if _, err := d.Prune(ctx, now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := d.MCPToken(ctx, "b"); ok {
		t.Error("an expired token survived the janitor")
	}
	if _, ok, _ := d.MCPToken(ctx, "a"); !ok {
		t.Error("a token without expiry was pruned")
	}
	if ok, err := d.RevokeMCPToken(ctx, "a"); !ok || err != nil {
		t.Fatalf("revoke: got %v %v", ok, err)
	}
	if ok, err := d.RevokeMCPToken(ctx, "a"); ok || err != nil {
		t.Fatalf("revoke again: got %v %v, want false", ok, err)
	}
	if _, ok, _ := d.MCPToken(ctx, "a"); ok {
		t.Error("a revoked token is still found")
	}
}
