package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"conch/internal/testenv"
	dcfake "conch/internal/testenv/discord"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	slackfake "conch/internal/testenv/slack"
)

// sandboxEnv points conch at the test engine under a fresh instance.
func sandboxEnv(t *testing.T, prefix string) []string {
	e := engine.Docker(t)
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := prefix + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	return engineEnv(t, e, instance)
}

// TestUpSendFileSlackDiscord: the chart drawn in a real sandbox and sent
// with send_file is uploaded into the conversation on Slack (the
// external-upload flow) and on Discord (a message attachment), byte for
// byte, through their fakes.
func TestUpSendFileSlackDiscord(t *testing.T) {
	testenv.Short(t)
	chart := chartPNG(t)
	script := func(llm *fakellm.Server) {
		llm.Push(fakellm.ToolCalls(drawCall(t, chart)), fakellm.ToolCalls(sendCall("out/chart.png")), fakellm.Text("Chart attached."))
	}
	t.Run("slack", func(t *testing.T) {
		llm := fakellm.New(t)
		sl := slackfake.Start(t)
		alice := sl.Person("U0ALICE", "alice")
		p := startConch(t, append(slackEnv(t, llm, sl, t.TempDir(), "U0ALICE"), sandboxEnv(t, "sfs")...), "up")
		p.waitStderr(t, "slack socket mode connected")
		script(llm)
		dm := sl.DM(alice)
		sl.Post(alice, dm, "chart please")
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		var file *slackfake.File
		if err := sl.Wait(ctx, func() bool {
			for _, s := range sl.Sent(dm) {
				if s.File != nil {
					file = s.File
				}
			}
			return file != nil
		}); err != nil {
			t.Fatalf("no file uploaded; sent %+v; stderr:\n%s", sl.Sent(dm), p.stderr)
		}
		if file.Name != "chart.png" || !bytes.Equal(sl.FileData(file.ID), chart) {
			t.Fatalf("file %+v (%d bytes), want chart.png of %d", file, len(sl.FileData(file.ID)), len(chart))
		}
	})
	t.Run("discord", func(t *testing.T) {
		llm := fakellm.New(t)
		dc := dcfake.Start(t)
		alice := dc.Person("2000000000000000001", "alice")
		p := startConch(t, append(discordEnv(t, llm, dc, t.TempDir(), alice.ID), sandboxEnv(t, "sfd")...), "up")
		p.waitStderr(t, "discord gateway session")
		script(llm)
		dm := dc.DM(alice)
		dc.Post(alice, dm, "chart please")
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		var got []byte
		if err := dc.Wait(ctx, func() bool {
			for _, m := range dc.Messages(dm) {
				for _, a := range m.Attachments {
					if a.Filename == "chart.png" {
						got = dc.FileData(a.ID)
					}
				}
			}
			return got != nil
		}); err != nil {
			t.Fatalf("no attachment; messages %+v; stderr:\n%s", dc.Messages(dm), p.stderr)
		}
		if !bytes.Equal(got, chart) {
			t.Fatalf("attachment of %d bytes, want the chart's %d", len(got), len(chart))
		}
	})
}
