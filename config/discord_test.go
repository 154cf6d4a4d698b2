package config

import (
	"reflect"
	"testing"
)

func TestDiscordEnvAndValidate(t *testing.T) {
	c, err := Load("", []string{
		"HOME=" + t.TempDir(),
		"XDG_CONFIG_HOME=" + t.TempDir(),
		"CONCH_DISCORD_BOT_TOKEN=MTA.Gabc.def",
		"CONCH_DISCORD_ALLOW_FROM=80351110224678912,41771983423143937:80351110224678913",
	})
	if err != nil {
		t.Fatal(err)
	}
	d := c.Discord
	if !d.Enabled() || !reflect.DeepEqual(d.AllowFrom, []string{"80351110224678912", "41771983423143937:80351110224678913"}) {
		t.Fatalf("from the environment: %+v", d)
	}
	if d.GuildPolicy != "mention" || d.MaxFileBytes != 25<<20 || d.APIURL != "https://discord.com/api/v9/" {
		t.Fatalf("defaults: %+v", d)
	}
	if ps := d.validate(); len(ps) != 0 {
		t.Fatalf("valid config: %v", ps)
	}
	for _, tc := range []struct {
		mod func(*DiscordConfig)
		key string
	}{
		{func(d *DiscordConfig) { d.BotToken = "Bot abc" }, "discord.bot_token"},
		{func(d *DiscordConfig) { d.AllowFrom = []string{"@alice"} }, "discord.allow_from"},
		{func(d *DiscordConfig) { d.AllowFrom = nil }, "discord.allow_from"},
		{func(d *DiscordConfig) { d.GuildPolicy = "x" }, "discord.guild_policy"},
	} {
		bad := d
		tc.mod(&bad)
		if ps := bad.validate(); len(ps) != 1 || ps[0].Key != tc.key {
			t.Errorf("want one problem with %s, got %v", tc.key, ps)
		}
	}
}
