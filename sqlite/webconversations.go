package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"conch"
)

// The web chat's conversation list (channel/web.ConversationStore): one row
// each, every change one statement, so two processes writing the store
// cannot lose each other's changes.
const (
	sqlWebConversations = `SELECT id, title, created_at FROM web_conversations ORDER BY seq`
	sqlWebConversation  = `SELECT id, title, created_at FROM web_conversations WHERE id = ?`
	// An empty title becomes "Conversation <n>", n counting this one.
	sqlCreateWebConversation = `INSERT INTO web_conversations (id, title, created_at)
		SELECT ?1, CASE WHEN ?2 = '' THEN 'Conversation ' || (count(*) + 1) ELSE ?2 END, ?3 FROM web_conversations
		RETURNING title`
	sqlRenameWebConversation = `UPDATE web_conversations SET title = ? WHERE id = ?`
	sqlDeleteWebConversation = `DELETE FROM web_conversations WHERE id = ?`
)

// WebConversations lists the web chat's conversations, oldest first.
func (d *DB) WebConversations(ctx context.Context) ([]conch.WebConversation, error) {
	rows, err := d.r.QueryContext(ctx, sqlWebConversations)
	if err != nil {
		return nil, fmt.Errorf("web conversations: %w", err)
	}
	defer rows.Close()
	var list []conch.WebConversation
	for rows.Next() {
		var c conch.WebConversation
		var created int64
		if err := rows.Scan(&c.ID, &c.Title, &created); err != nil {
			return nil, fmt.Errorf("web conversations: %w", err)
		}
		c.Created = fromMillis(created)
		list = append(list, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("web conversations: %w", err)
	}
	return list, nil
}

// WebConversation returns one conversation; ok is false when there is none.
func (d *DB) WebConversation(ctx context.Context, id string) (conch.WebConversation, bool, error) {
	var c conch.WebConversation
	var created int64
	err := d.r.QueryRowContext(ctx, sqlWebConversation, id).Scan(&c.ID, &c.Title, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return conch.WebConversation{}, false, nil
	}
	if err != nil {
		return conch.WebConversation{}, false, fmt.Errorf("web conversation: %w", err)
	}
	c.Created = fromMillis(created)
	return c, true, nil
}

// CreateWebConversation stores c at the end of the list and returns it as
// stored: an empty title becomes "Conversation <n>".
func (d *DB) CreateWebConversation(ctx context.Context, c conch.WebConversation) (conch.WebConversation, error) {
	if c.ID == "" {
		return conch.WebConversation{}, fmt.Errorf("create web conversation: %w", conch.Errorf(conch.KindInvalid, "id is empty"))
	}
	if err := d.w.QueryRowContext(ctx, sqlCreateWebConversation, c.ID, c.Title, millis(c.Created)).Scan(&c.Title); err != nil {
		return conch.WebConversation{}, fmt.Errorf("create web conversation: %w", err)
	}
	return c, nil
}

// RenameWebConversation sets a conversation's title; ok is false when there
// is none.
func (d *DB) RenameWebConversation(ctx context.Context, id, title string) (bool, error) {
	return d.changeWebConversation(ctx, "rename", sqlRenameWebConversation, title, id)
}

// DeleteWebConversation removes a conversation from the list; ok is false
// when there is none.
func (d *DB) DeleteWebConversation(ctx context.Context, id string) (bool, error) {
	return d.changeWebConversation(ctx, "delete", sqlDeleteWebConversation, id)
}

func (d *DB) changeWebConversation(ctx context.Context, op, query string, args ...any) (bool, error) {
	res, err := d.execSQL(ctx, query, args...)
	if err != nil {
		return false, fmt.Errorf("%s web conversation: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s web conversation: %w", op, err)
	}
	return n == 1, nil
}
