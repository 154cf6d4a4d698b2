package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"conch/internal/testenv"
	dcfake "conch/internal/testenv/discord"
	"conch/internal/testenv/fakellm"
	slackfake "conch/internal/testenv/slack"
	"conch/media/mediatest"
)

// visionConfig writes the conch.toml the env helpers point at (dir/config)
// with the fake model listed as one that sees pictures.
func visionConfig(t *testing.T, dir string) {
	t.Helper()
	cfg := filepath.Join(dir, "config", "conch")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "conch.toml"), []byte("[media]\nvision = { \"test-model\" = true }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkPictureIn: the model's last request carries the photo as one
// upright JPEG (it was stored sideways) without its EXIF block or location.
func checkPictureIn(t *testing.T, llm *fakellm.Server, stderr func() string) {
	t.Helper()
	req, _ := llm.Last()
	ims := req.Messages[len(req.Messages)-1].Images
	if len(ims) != 1 || ims[0].MediaType != "image/jpeg" || ims[0].Width != 200 || ims[0].Height != 400 {
		var got []string
		for _, im := range ims {
			got = append(got, fmt.Sprintf("%s %d×%d", im.MediaType, im.Width, im.Height))
		}
		t.Fatalf("the model got %d pictures %v, want one upright 200×400 JPEG; stderr:\n%s", len(ims), got, stderr())
	}
	if bytes.Contains(ims[0].Data, []byte("Exif")) || bytes.Contains(ims[0].Data, []byte(mediatest.Location)) {
		t.Fatal("the picture sent to the model still holds its EXIF block and location")
	}
}

// TestUpSlackPictureIn: a photo posted in Slack reaches the model as an
// image part, prepared like every channel's (the real binary, the Slack
// fake, SQLite).
func TestUpSlackPictureIn(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	sl := slackfake.Start(t)
	alice := sl.Person("U0ALICE", "alice")
	dir := t.TempDir()
	visionConfig(t, dir)
	p := startConch(t, slackEnv(t, llm, sl, dir, "U0ALICE"), "up")
	p.waitStderr(t, "slack socket mode connected")
	llm.Push(fakellm.Text("A red and blue picture."))
	dm := sl.DM(alice)
	sl.Post(alice, dm, "what is this?", slackfake.WithFile("photo.jpg", mediatest.Photo(400, 200, 6)))
	sl.WaitMessages(t, dm, "", 1, 30*time.Second)
	checkPictureIn(t, llm, func() string { return p.stderr.String() })
}

// TestUpDiscordPictureIn: the same through the Discord fake.
func TestUpDiscordPictureIn(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	dc := dcfake.Start(t)
	alice := dc.Person("2000000000000000001", "alice")
	dir := t.TempDir()
	visionConfig(t, dir)
	p := startConch(t, discordEnv(t, llm, dc, dir, alice.ID), "up")
	p.waitStderr(t, "discord gateway session")
	llm.Push(fakellm.Text("A red and blue picture."))
	dm := dc.DM(alice)
	dc.Post(alice, dm, "what is this?", dcfake.WithAttachment("photo.jpg", mediatest.Photo(400, 200, 6)))
	dc.WaitMessages(t, dm, 1, 30*time.Second)
	checkPictureIn(t, llm, func() string { return p.stderr.String() })
}
