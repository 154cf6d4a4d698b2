package matrix

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// CheckLogin asks the homeserver who the access token belongs to, for
// `conch doctor`. It reports a token that belongs to someone else.
func CheckLogin(ctx context.Context, homeserver, userID, accessToken string) error {
	cli, err := mautrix.NewClient(homeserver, id.UserID(userID), accessToken)
	if err != nil {
		return fmt.Errorf("matrix.homeserver %q: %w", homeserver, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	who, err := cli.Whoami(ctx)
	if err != nil {
		var herr mautrix.HTTPError
		if errors.As(err, &herr) && herr.RespError != nil && herr.RespError.ErrCode == mautrix.MUnknownToken.ErrCode {
			return fmt.Errorf("the homeserver refused matrix.access_token (%s): set a valid token", herr.RespError.Err)
		}
		return fmt.Errorf("cannot reach the homeserver at %s: %w", homeserver, err)
	}
	if userID != "" && string(who.UserID) != userID {
		return fmt.Errorf("matrix.access_token belongs to %s, not matrix.user_id %s", who.UserID, userID)
	}
	return nil
}

// Undecryptable counts, per room, the encrypted messages still waiting for
// their room key, as stored by the channel. An empty map means none; a
// database the channel never used has none.
func Undecryptable(ctx context.Context, db *sql.DB) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT room_id, count(*) FROM conch_matrix_pending GROUP BY room_id`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return map[string]int{}, nil
		}
		return nil, fmt.Errorf("undecryptable messages: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var room string
		var n int
		if err := rows.Scan(&room, &n); err != nil {
			return nil, fmt.Errorf("undecryptable messages: %w", err)
		}
		out[room] = n
	}
	return out, rows.Err()
}
