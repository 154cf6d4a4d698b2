package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"conch"
	"conch/gateway"
	"conch/internal/testenv/fakellm"
	"conch/sqlite"
)

func TestPairingCommands(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := testEnv(srv, fakellm.OpenAI, dir)
	if out, errOut, code := conchRun(t, env, "pairing list"); code != 0 || !strings.Contains(out, "STATE") {
		t.Fatalf("list on a new data dir: %d %q %q", code, out, errOut)
	}
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "data", "conch.db"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, err := gateway.Pairings{Store: db}.Request(context.Background(), conch.Inbound{
		Key: conch.ConversationKey{Channel: conch.ChannelTelegram, ID: "777"}, Sender: "777", SenderName: "@zoe_q",
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, rc := conchRun(t, env, "pairing list")
	if rc != 0 || !strings.Contains(out, "pending") || !strings.Contains(out, code) || !strings.Contains(out, "@zoe_q") {
		t.Fatalf("list: %d %q %q", rc, out, errOut)
	}
	if _, errOut, rc = conchRun(t, env, "pairing approve NOPE2345"); rc == 0 || !strings.Contains(errOut, "no pending pairing code") {
		t.Fatalf("approve a wrong code: %d %q", rc, errOut)
	}
	if out, errOut, rc = conchRun(t, env, "pairing approve "+strings.ToLower(code)); rc != 0 || !strings.Contains(out, "approved 777 on telegram") {
		t.Fatalf("approve: %d %q %q", rc, out, errOut)
	}
	if out, _, _ = conchRun(t, env, "pairing list"); !strings.Contains(out, "approved") {
		t.Fatalf("list after approve: %q", out)
	}
	if out, errOut, rc = conchRun(t, env, "pairing revoke telegram:777"); rc != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: %d %q %q", rc, out, errOut)
	}
	if _, errOut, rc = conchRun(t, env, "pairing revoke telegram:777"); rc == 0 || !strings.Contains(errOut, "was not approved") {
		t.Fatalf("second revoke: %d %q", rc, errOut)
	}
}
