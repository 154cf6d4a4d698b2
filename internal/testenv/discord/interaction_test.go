package discord

import (
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
)

// TestComponentInteractionsWithDiscordgo validates the fake's buttons and
// component interactions with the official client library: a message with
// an action row, a press dispatched as INTERACTION_CREATE that discordgo
// decodes, an ephemeral answer to it (once), and an edit that removes the
// buttons.
func TestComponentInteractionsWithDiscordgo(t *testing.T) {
	s := Start(t)
	dg := dgSession(t, s, discordgo.IntentsGuildMessages|discordgo.IntentsMessageContent)
	got := make(chan *discordgo.InteractionCreate, 4)
	dg.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { got <- i })
	if err := dg.Open(); err != nil {
		t.Fatal(err)
	}
	defer dg.Close()
	alice := s.Person("2000000000000000001", "alice")
	general := s.TextChannel("3000000000000000001", "general")

	m, err := dg.ChannelMessageSendComplex(general, &discordgo.MessageSend{Content: "Run git push?",
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "Allow once", Style: discordgo.SuccessButton, CustomID: "q1:once"},
			discordgo.Button{Label: "Deny", Style: discordgo.DangerButton, CustomID: "q1:deny"},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Components) != 1 {
		t.Fatalf("sent message's components: %+v", m.Components)
	}
	// A button without a custom_id is refused, as by Discord.
	_, err = dg.ChannelMessageSendComplex(general, &discordgo.MessageSend{Content: "x",
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.Button{Label: "x", Style: discordgo.PrimaryButton}}}}})
	if err == nil || !strings.Contains(err.Error(), "50035") {
		t.Fatalf("a button without custom_id: %v", err)
	}
	if _, err := s.Click(alice, general, m.ID, "q1:maybe"); err == nil {
		t.Fatal("pressed a button the message does not have")
	}
	if _, err := s.Click(alice, general, m.ID, "q1:once"); err != nil {
		t.Fatal(err)
	}
	var i *discordgo.InteractionCreate
	select {
	case i = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no INTERACTION_CREATE")
	}
	if i.Type != discordgo.InteractionMessageComponent || i.MessageComponentData().CustomID != "q1:once" || i.ChannelID != general ||
		i.Member == nil || i.Member.User.ID != alice.ID || i.Message == nil || i.Message.ID != m.ID || i.GuildID == "" {
		t.Fatalf("interaction %+v", i)
	}
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: "only you see this", Flags: discordgo.MessageFlagsEphemeral}}
	if err := dg.InteractionRespond(i.Interaction, resp); err != nil {
		t.Fatal(err)
	}
	if err := dg.InteractionRespond(i.Interaction, resp); err == nil || !strings.Contains(err.Error(), "40060") {
		t.Fatalf("a second response: %v", err)
	}
	var answered bool
	for _, x := range s.Sent(general) {
		answered = answered || x.Method == "interaction" && x.Ephemeral && x.Content == "only you see this"
	}
	if !answered {
		t.Fatalf("sent %+v", s.Sent(general))
	}
	text, none := "Allowed once", []discordgo.MessageComponent{}
	if _, err := dg.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: m.ID, Channel: general, Content: &text, Components: &none}); err != nil {
		t.Fatal(err)
	}
	for _, x := range s.Messages(general) {
		if x.ID == m.ID && (len(x.Components) != 0 || x.Content != "Allowed once") {
			t.Fatalf("after the edit: %+v", x)
		}
	}
	if _, err := s.Click(alice, general, m.ID, "q1:once"); err == nil {
		t.Fatal("pressed a button that was removed")
	}
}
