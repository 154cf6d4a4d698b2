package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestSlackEnvAndValidate(t *testing.T) {
	c, err := Load("", []string{
		"HOME=" + t.TempDir(),
		"XDG_CONFIG_HOME=" + t.TempDir(),
		"CONCH_SLACK_BOT_TOKEN=xoxb-1-2-abc",
		"CONCH_SLACK_APP_TOKEN=xapp-1-A1-3-def",
		"CONCH_SLACK_ALLOW_FROM=U012AB3CD,T0123:W0456",
	})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Slack
	if !s.Enabled() || !reflect.DeepEqual(s.AllowFrom, []string{"U012AB3CD", "T0123:W0456"}) {
		t.Fatalf("from the environment: %+v", s)
	}
	if s.Mode != "socket" || s.ChannelPolicy != "mention" || s.MaxFileBytes != 20<<20 || s.APIURL != "https://slack.com/api/" {
		t.Fatalf("defaults: %+v", s)
	}
	if ps := s.validate(); len(ps) != 0 {
		t.Fatalf("valid config: %v", ps)
	}
	if ps := (SlackConfig{}).validate(); ps != nil {
		t.Fatalf("disabled: %v", ps)
	}
	for _, tc := range []struct {
		mod func(*SlackConfig)
		key string
	}{
		{func(s *SlackConfig) { s.AppToken = "" }, "slack.app_token"},
		{func(s *SlackConfig) { s.BotToken = "xoxp-user" }, "slack.bot_token"},
		{func(s *SlackConfig) { s.AllowFrom = []string{"alice"} }, "slack.allow_from"},
		{func(s *SlackConfig) { s.AllowFrom = nil }, "slack.allow_from"},
		{func(s *SlackConfig) { s.ChannelPolicy = "some" }, "slack.channel_policy"},
		{func(s *SlackConfig) { s.Mode = "events" }, "slack.signing_secret"},
		{func(s *SlackConfig) { s.Mode = "webhook" }, "slack.mode"},
	} {
		bad := s
		tc.mod(&bad)
		ps := bad.validate()
		if len(ps) != 1 || ps[0].Key != tc.key {
			t.Errorf("want one problem with %s, got %v", tc.key, ps)
		}
	}
	var keys []string
	for _, p := range (SlackConfig{Mode: "socket", BotToken: "xoxb-1", AppToken: "xapp-1", APIURL: "https://slack.com/api/", ChannelPolicy: "mention", MaxFileBytes: 1, DMPolicy: DMPairing}).validate() {
		keys = append(keys, p.Key)
	}
	if len(keys) != 0 {
		t.Fatalf("pairing without an allowlist: %s", strings.Join(keys, ", "))
	}
}
