package slack

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// CheckApp asks Slack who the bot token belongs to (auth.test) and whether
// the app token may open Socket Mode (apps.connections.open, whose URL is
// not used; skipped when appToken is "", the Events API), for `conch
// doctor`. It returns "@bot in team".
func CheckApp(ctx context.Context, apiURL, botToken, appToken string) (string, error) {
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	switch {
	case !strings.HasPrefix(botToken, "xoxb-"):
		return "", fmt.Errorf("slack.bot_token does not look like a Bot User OAuth Token (xoxb-…): copy it from the app's OAuth & Permissions page")
	case appToken != "" && !strings.HasPrefix(appToken, "xapp-"):
		return "", fmt.Errorf("slack.app_token does not look like an app-level token (xapp-…): create one with connections:write under Basic Information")
	}
	api := slack.New(botToken, slack.OptionAPIURL(apiURL), slack.OptionAppLevelToken(appToken),
		slack.OptionHTTPClient(&http.Client{Timeout: 15 * time.Second}))
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	r, err := api.AuthTestContext(ctx)
	if err = classify("auth.test", err); err != nil {
		if isAuth(err) {
			return "", fmt.Errorf("slack.bot_token was refused (%v): copy the Bot User OAuth Token again", err)
		}
		return "", fmt.Errorf("cannot reach Slack at %s: %s", apiURL, describe(err))
	}
	if appToken == "" {
		return "@" + r.User + " in " + r.Team, nil
	}
	if _, _, err := api.StartSocketModeContext(ctx); err != nil {
		err = classify("apps.connections.open", err)
		if isAuth(err) {
			return "", fmt.Errorf("slack.app_token was refused (%v): it needs the connections:write scope, and Socket Mode must be on", err)
		}
		return "", fmt.Errorf("socket mode: %s", describe(err))
	}
	return "@" + r.User + " in " + r.Team, nil
}
