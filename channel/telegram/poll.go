package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-telegram/bot/models"

	"conch"
)

// allowedUpdates are the update types the bot asks for.
var allowedUpdates = []string{"message", "my_chat_member", "callback_query"}

// poll is the update loop. The library's own loop confirms updates to the
// server as soon as it fetched them (before a handler ran); ours stores the
// offset after each update was handed to the gateway, so a crash fetches
// the unhandled ones again.
func (c *Channel) poll(ctx context.Context) error {
	name := c.offsetCursor()
	v, err := c.opts.Cursors.Cursor(ctx, name)
	if err != nil {
		return fmt.Errorf("telegram: load offset: %w", err)
	}
	var offset int64
	if v != "" {
		if offset, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("telegram: stored offset %q: %w", v, err)
		}
	}
	c.log.Info("telegram polling", "offset", offset)
	failures := 0
	fail := func(err error) bool {
		failures++
		wait := c.opts.Backoff.Delay(failures)
		if ra := retryAfter(err); ra > wait {
			wait = ra
		}
		c.notePoll(err, c.opts.Now().Add(wait))
		c.log.Warn("telegram: polling failed, retrying", "attempt", failures, "wait", wait, "err", err)
		return c.opts.Backoff.Sleep(ctx, wait) == nil
	}
	for ctx.Err() == nil {
		updates, err := c.getUpdates(ctx, offset)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if codeOf(err) == 401 {
				c.notePoll(err, time.Time{})
				return &conch.Error{Kind: conch.KindAuth, User: "Telegram refused the bot token",
					Err: fmt.Errorf("telegram: getUpdates: %w (check telegram.bot_token)", err)}
			}
			if !fail(err) {
				return nil
			}
			continue
		}
		failures = 0
		c.notePoll(nil, time.Time{})
		for _, u := range updates {
			if u.ID < offset {
				continue // already handled (a server that ignores offsets)
			}
			herr := c.handle(ctx, u)
			if herr != nil && ctx.Err() != nil {
				return nil
			}
			if herr != nil && conch.KindOf(herr) == conch.KindInvalid {
				// The gateway refused the message itself (a file over its
				// limit, say): fetching it again cannot help.
				c.log.Warn("telegram: message refused by the gateway, skipped", "update", u.ID, "err", herr)
				herr = nil
			}
			if herr != nil {
				// Not handed over: the offset stays; the update comes again.
				if !fail(fmt.Errorf("handle update %d: %w", u.ID, herr)) {
					return nil
				}
				break
			}
			offset = u.ID + 1
			// The update was handed over: store even if ctx ended just now.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err := c.opts.Cursors.SetCursor(sctx, name, strconv.FormatInt(offset, 10))
			cancel()
			if err != nil {
				// The gateway de-duplicates by message id: a re-delivery is harmless.
				c.log.Error("telegram: store offset", "offset", offset, "err", err)
			}
		}
	}
	return nil
}

type getUpdatesRequest struct {
	Offset         int64    `json:"offset,omitempty"`
	Limit          int      `json:"limit,omitempty"`
	Timeout        int      `json:"timeout"`
	AllowedUpdates []string `json:"allowed_updates"`
}

type apiResponse struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

// getUpdates is one long poll (the library keeps its own getUpdates private).
func (c *Channel) getUpdates(ctx context.Context, offset int64) ([]*models.Update, error) {
	body, err := json.Marshal(getUpdatesRequest{
		Offset: offset, Limit: 100, Timeout: int(c.opts.PollTimeout / time.Second), AllowedUpdates: allowedUpdates,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.PollTimeout+15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.APIURL+"/bot"+c.opts.Token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, errors.New("getUpdates: bad API URL")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", redact(err, c.opts.Token))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: read answer: %w", redact(err, c.opts.Token))
	}
	var r apiResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		// A proxy's HTML error page, say.
		return nil, &apiError{Method: "getUpdates", Code: resp.StatusCode, Description: http.StatusText(resp.StatusCode)}
	}
	if !r.OK {
		code := r.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, &apiError{Method: "getUpdates", Code: code, Description: r.Description, RetryAfter: r.Parameters.RetryAfter}
	}
	var updates []*models.Update
	if err := json.Unmarshal(r.Result, &updates); err != nil {
		return nil, fmt.Errorf("getUpdates: decode updates: %w", err)
	}
	return updates, nil
}

// redact keeps the token out of error texts (url.Error carries the URL).
func redact(err error, token string) error {
	return redactedError{err: err, token: token}
}

type redactedError struct {
	err   error
	token string
}

func (e redactedError) Error() string {
	return string(bytes.ReplaceAll([]byte(e.err.Error()), []byte(e.token), []byte("<token>")))
}
func (e redactedError) Unwrap() error { return e.err }
