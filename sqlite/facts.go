package sqlite

import (
	"context"
	"fmt"
	"unicode/utf8"

	"conch"
)

// Limits on facts, which a model writes through the memory tool.
const (
	MaxFactKeyLen   = 200      // bytes
	MaxFactValueLen = 16 << 10 // bytes
)

const (
	sqlRemember = `INSERT INTO facts (user_channel, user_id, key, value, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (user_channel, user_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`
	sqlForget = `DELETE FROM facts WHERE user_channel = ? AND user_id = ? AND key = ?`
	sqlFacts  = `SELECT key, value, updated_at FROM facts WHERE user_channel = ? AND user_id = ? ORDER BY key`
)

// Remember stores or replaces a fact about a person.
func (d *DB) Remember(ctx context.Context, user conch.UserKey, key, value string) error {
	if err := validUser(user); err != nil {
		return fmt.Errorf("remember: %w", err)
	}
	if err := validFactKey(key); err != nil {
		return fmt.Errorf("remember: %w", err)
	}
	switch {
	case value == "":
		return fmt.Errorf("remember %q: %w", key, conch.Errorf(conch.KindInvalid, "fact %q has an empty value (to drop a fact, forget it)", key))
	case len(value) > MaxFactValueLen:
		return fmt.Errorf("remember %q: %w", key, conch.Errorf(conch.KindInvalid, "fact %q is %d bytes long, the limit is %d", key, len(value), MaxFactValueLen))
	case !utf8.ValidString(value):
		return fmt.Errorf("remember %q: %w", key, conch.Errorf(conch.KindInvalid, "fact %q is not valid UTF-8", key))
	}
	if _, err := d.exec(ctx, d.ws.remember, user.Channel, user.ID, key, value, millis(d.now())); err != nil {
		return fmt.Errorf("remember %q for %s: %w", key, user, err)
	}
	return nil
}

// Forget deletes a fact; it reports whether there was one.
func (d *DB) Forget(ctx context.Context, user conch.UserKey, key string) (bool, error) {
	if err := validUser(user); err != nil {
		return false, fmt.Errorf("forget: %w", err)
	}
	if err := validFactKey(key); err != nil {
		return false, fmt.Errorf("forget: %w", err)
	}
	res, err := d.exec(ctx, d.ws.forget, user.Channel, user.ID, key)
	if err != nil {
		return false, fmt.Errorf("forget %q for %s: %w", key, user, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("forget %q for %s: %w", key, user, err)
	}
	return n > 0, nil
}

// Facts returns a person's facts sorted by key.
func (d *DB) Facts(ctx context.Context, user conch.UserKey) ([]conch.Fact, error) {
	if err := validUser(user); err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	rows, err := d.rs.facts.QueryContext(ctx, user.Channel, user.ID)
	if err != nil {
		return nil, fmt.Errorf("facts of %s: %w", user, err)
	}
	defer rows.Close()
	var fs []conch.Fact
	for rows.Next() {
		var f conch.Fact
		var at int64
		if err := rows.Scan(&f.Key, &f.Value, &at); err != nil {
			return nil, fmt.Errorf("facts of %s: %w", user, err)
		}
		f.UpdatedAt = fromMillis(at)
		fs = append(fs, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("facts of %s: %w", user, err)
	}
	return fs, nil
}

func validUser(u conch.UserKey) error {
	switch {
	case u.Channel == "" && u.ID == "":
		return conch.Errorf(conch.KindInvalid, "user key is empty")
	case u.Channel == "":
		return conch.Errorf(conch.KindInvalid, "user %q has no channel", u.ID)
	case u.ID == "":
		return conch.Errorf(conch.KindInvalid, "user key of channel %s has no id", u.Channel)
	}
	return nil
}

func validFactKey(key string) error {
	switch {
	case key == "":
		return conch.Errorf(conch.KindInvalid, "fact key is empty")
	case len(key) > MaxFactKeyLen:
		return conch.Errorf(conch.KindInvalid, "fact key is %d bytes long, the limit is %d", len(key), MaxFactKeyLen)
	case !utf8.ValidString(key):
		return conch.Errorf(conch.KindInvalid, "fact key is not valid UTF-8")
	}
	return nil
}
