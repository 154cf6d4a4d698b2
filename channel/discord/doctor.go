package discord

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
)

// CheckBot asks Discord who the token belongs to (GET /users/@me) and
// whether it may open the Gateway (GET /gateway/bot), for `conch doctor`.
// The privileged Message Content intent cannot be checked without
// connecting: a missing one shows in /status as no READY.
func CheckBot(ctx context.Context, apiURL, token string) (string, error) {
	token = strings.TrimPrefix(strings.TrimSpace(token), "Bot ")
	if token == "" {
		return "", fmt.Errorf("discord.bot_token is empty: copy it from the Developer Portal (Bot → Reset Token)")
	}
	dg, err := discordgo.New("Bot " + token)
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: 15 * time.Second}
	if apiURL != "" && strings.TrimSuffix(apiURL, "/")+"/" != DefaultAPIURL {
		u, err := url.Parse(apiURL)
		if err != nil {
			return "", fmt.Errorf("discord.api_url: %w", err)
		}
		client.Transport = rewrite{base: http.DefaultTransport, to: u}
	}
	dg.Client = client
	dg.LogLevel = -1
	dg.MaxRestRetries = 0
	dg.ShouldRetryOnRateLimit = false
	me, err := dg.User("@me", discordgo.WithContext(ctx))
	if err = classify("GET /users/@me", err); err != nil {
		if statusOf(err) == http.StatusUnauthorized {
			return "", fmt.Errorf("the token was refused: discord.bot_token (%v); reset the token in the Developer Portal and copy it again", err)
		}
		return "", fmt.Errorf("cannot reach Discord: %s", describe(err))
	}
	if !me.Bot {
		return "", fmt.Errorf("discord.bot_token belongs to %s, which is not a bot", me.Username)
	}
	if _, err := dg.GatewayBot(discordgo.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("gateway: %s", describe(classify("GET /gateway/bot", err)))
	}
	return me.Username + " (" + me.ID + ")", nil
}
