package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	testmail "conch/internal/testenv/mail"
)

// TestUpSendFileEmail: a chart drawn in a real sandbox and sent with
// send_file reaches the person through real postfix and dovecot as an
// inline MIME part of the reply (multipart/related, shown by Content-ID in
// the HTML), byte for byte.
func TestUpSendFileEmail(t *testing.T) {
	testenv.Short(t)
	ms := testmail.Start(t)
	conchUser, alice := ms.AddUser(t, "conch"), ms.AddUser(t, "alice")
	llm := fakellm.New(t)
	e := engine.Docker(t)
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "sfm" + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	env := append(testEnv(llm, fakellm.OpenAI, t.TempDir()), "CONCH_GATEWAY_LISTEN=")
	env = append(append(env, emailEnv(ms, conchUser, alice)...), engineEnv(t, e, instance)...)
	chart := chartPNG(t)

	llm.Push(fakellm.ToolCalls(drawCall(t, chart)), fakellm.ToolCalls(sendCall("out/chart.png")), fakellm.Text("The chart is below."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "email: watching mailbox")
	ms.MustSend(t, alice.Address, []string{conchUser.Address}, personMail("Alice <"+alice.Address+">", conchUser.Address, "Chart", "c1@example.test", "Draw me a chart."))
	msgs := ms.MustWait(t, alice, 1, 120*time.Second)
	m, err := message.Read(bytes.NewReader(msgs[0].Raw))
	if err != nil {
		t.Fatal(err)
	}
	var html, cid, related string
	var img []byte
	var walk func(e *message.Entity, parent string)
	walk = func(e *message.Entity, parent string) {
		mt, _, _ := e.Header.ContentType()
		if mr := e.MultipartReader(); mr != nil {
			for {
				p, err := mr.NextPart()
				if err != nil {
					return
				}
				walk(p, mt)
			}
		}
		b, _ := io.ReadAll(e.Body)
		switch mt {
		case "text/html":
			html = string(b)
		case "image/png":
			img, related = b, parent
			cid = strings.Trim(e.Header.Get("Content-Id"), "<>")
		}
	}
	walk(m, "")
	if !bytes.Equal(img, chart) || related != "multipart/related" {
		t.Fatalf("the reply carries %d bytes of image/png in %q, want the chart's %d inline; stderr:\n%s\nmail:\n%.3000s", len(img), related, len(chart), p.stderr, msgs[0].Raw)
	}
	if cid == "" || !strings.Contains(html, "cid:"+cid) || !strings.Contains(html, "The chart is below.") {
		t.Fatalf("the HTML does not show the picture (cid %q):\n%s", cid, html)
	}
}
