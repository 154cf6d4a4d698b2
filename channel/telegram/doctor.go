package telegram

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-telegram/bot"
)

// CheckBot asks the Bot API who the token belongs to, for `conch doctor`,
// and returns the bot's @username.
func CheckBot(ctx context.Context, apiURL, token string) (string, error) {
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	if !ValidToken(token) {
		return "", fmt.Errorf("telegram.bot_token does not look like a bot token (<bot id>:<secret>): copy it from BotFather")
	}
	b, err := bot.New(token, bot.WithSkipGetMe(), bot.WithServerURL(strings.TrimRight(apiURL, "/")),
		bot.WithHTTPClient(15*time.Second, &http.Client{Timeout: 15 * time.Second}))
	if err != nil {
		return "", fmt.Errorf("telegram: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	me, err := b.GetMe(ctx)
	if err != nil {
		err = classify("getMe", err)
		if isAuth(err) {
			return "", fmt.Errorf("the Bot API refused telegram.bot_token (%v): get a valid token from BotFather", err)
		}
		return "", fmt.Errorf("cannot reach the Bot API at %s: %s", apiURL, describe(err))
	}
	if !me.IsBot {
		return "", fmt.Errorf("telegram.bot_token belongs to %d, which is not a bot", me.ID)
	}
	return "@" + me.Username, nil
}
