package slack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// TestBlockActionsWithSlackGo validates the fake's Block Kit buttons and
// block_actions interactions with the official client library: a message
// with an actions block, a press delivered over Socket Mode as an
// "interactive" envelope slack-go decodes into an InteractionCallback, an
// ephemeral message, and chat.update with no blocks removing the buttons.
func TestBlockActionsWithSlackGo(t *testing.T) {
	s := Start(t)
	api := client(s)
	alice := s.Person("U0ALICE", "alice")
	gen := s.Channel("C0GEN", "general")
	sm, _ := socket(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	blocks := []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "Run `git push`?", false, false), nil, nil),
		slack.NewActionBlock("q1",
			slack.NewButtonBlockElement("approve_once", "q1:once", slack.NewTextBlockObject(slack.PlainTextType, "Allow once", false, false)),
			slack.NewButtonBlockElement("approve_deny", "q1:deny", slack.NewTextBlockObject(slack.PlainTextType, "Deny", false, false))),
	}
	_, ts, err := api.PostMessageContext(ctx, gen, slack.MsgOptionText("Run git push?", false), slack.MsgOptionBlocks(blocks...))
	if err != nil {
		t.Fatal(err)
	}
	// A button without a text is refused, as by Slack.
	bad := slack.NewActionBlock("q2", &slack.ButtonBlockElement{Type: slack.METButton, ActionID: "x", Value: "y"})
	if _, _, err := api.PostMessageContext(ctx, gen, slack.MsgOptionText("x", false), slack.MsgOptionBlocks(bad)); err == nil || !strings.Contains(err.Error(), "invalid_blocks") {
		t.Fatalf("a button without text: %v", err)
	}
	if err := s.Click(alice, gen, ts, "approve_maybe"); err == nil {
		t.Fatal("pressed a button the message does not have")
	}
	if err := s.Click(alice, gen, ts, "approve_once"); err != nil {
		t.Fatal(err)
	}
	var ic slack.InteractionCallback
	for ic.Type == "" {
		select {
		case <-ctx.Done():
			t.Fatal("no interactive envelope")
		case ev := <-sm.Events:
			if ev.Type != socketmode.EventTypeInteractive {
				continue
			}
			ic = ev.Data.(slack.InteractionCallback)
			if err := sm.Ack(*ev.Request); err != nil {
				t.Fatal(err)
			}
		}
	}
	acts := ic.ActionCallback.BlockActions
	if ic.Type != slack.InteractionTypeBlockActions || ic.User.ID != alice.ID || ic.Container.ChannelID != gen || ic.Container.MessageTs != ts ||
		len(acts) != 1 || acts[0].ActionID != "approve_once" || acts[0].Value != "q1:once" || acts[0].BlockID != "q1" || ic.Team.ID != s.TeamID {
		t.Fatalf("interaction %+v", ic)
	}
	if _, err := api.PostEphemeralContext(ctx, gen, alice.ID, slack.MsgOptionText("only you see this", false)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, gen, ts, slack.MsgOptionText("Allowed once", false)); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Message(gen, ts); len(m.Blocks) == 0 {
		t.Fatal("an update without blocks removed them; Slack keeps them")
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, gen, ts, slack.MsgOptionText("Allowed once", false), slack.MsgOptionBlocks()); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Message(gen, ts); len(m.Blocks) != 0 || m.Text != "Allowed once" {
		t.Fatalf("after the update with no blocks: %+v", m)
	}
}
