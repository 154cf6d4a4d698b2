package web

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"conch"
)

// Conversation is one web chat conversation the person keeps.
type Conversation struct {
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Created time.Time `json:"created"`
}

// Key is the conversation's routing key.
func (c Conversation) Key() conch.ConversationKey {
	return conch.ConversationKey{Channel: conch.ChannelWeb, ID: c.ID}
}

// maxTitle bounds a conversation title, in runes.
const maxTitle = 120

// conversations is the person's list of web conversations, kept as one
// JSON cursor: a single owner has tens of them, not millions, and the list
// changes only by the person's own clicks.
type conversations struct {
	store Cursors
	now   func() time.Time
	mu    sync.Mutex
}

func (cs *conversations) load(ctx context.Context) ([]Conversation, error) {
	v, err := cs.store.Cursor(ctx, cursorConvs)
	if err != nil {
		return nil, fmt.Errorf("web conversations: %w", err)
	}
	var list []Conversation
	if v != "" {
		if err := json.Unmarshal([]byte(v), &list); err != nil {
			return nil, fmt.Errorf("web conversations: %w", err)
		}
	}
	return list, nil
}

func (cs *conversations) save(ctx context.Context, list []Conversation) error {
	b, err := json.Marshal(list)
	if err != nil {
		return err
	}
	if err := cs.store.SetCursor(ctx, cursorConvs, string(b)); err != nil {
		return fmt.Errorf("web conversations: %w", err)
	}
	return nil
}

// List returns the conversations, newest first.
func (cs *conversations) List(ctx context.Context) ([]Conversation, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	list, err := cs.load(ctx)
	slices.Reverse(list)
	return list, err
}

// Get returns one conversation; KindNotFound when there is none.
func (cs *conversations) Get(ctx context.Context, id string) (Conversation, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	list, err := cs.load(ctx)
	if err != nil {
		return Conversation{}, err
	}
	for _, c := range list {
		if c.ID == id {
			return c, nil
		}
	}
	return Conversation{}, conch.Errorf(conch.KindNotFound, "no conversation %q", id)
}

// Create adds a conversation with a fresh id.
func (cs *conversations) Create(ctx context.Context, title string) (Conversation, error) {
	title, err := cleanTitle(title)
	if err != nil {
		return Conversation{}, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	list, err := cs.load(ctx)
	if err != nil {
		return Conversation{}, err
	}
	c := Conversation{ID: "c" + strings.ToLower(randomToken(9)), Title: title, Created: cs.now().UTC().Truncate(time.Second)}
	if c.Title == "" {
		c.Title = "Conversation " + fmt.Sprint(len(list)+1)
	}
	list = append(list, c)
	return c, cs.save(ctx, list)
}

// Rename changes a conversation's title.
func (cs *conversations) Rename(ctx context.Context, id, title string) (Conversation, error) {
	title, err := cleanTitle(title)
	if err != nil {
		return Conversation{}, err
	}
	if title == "" {
		return Conversation{}, conch.Errorf(conch.KindInvalid, "a title cannot be empty")
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	list, err := cs.load(ctx)
	if err != nil {
		return Conversation{}, err
	}
	for i := range list {
		if list[i].ID == id {
			list[i].Title = title
			return list[i], cs.save(ctx, list)
		}
	}
	return Conversation{}, conch.Errorf(conch.KindNotFound, "no conversation %q", id)
}

// Delete removes a conversation from the list.
func (cs *conversations) Delete(ctx context.Context, id string) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	list, err := cs.load(ctx)
	if err != nil {
		return err
	}
	n := len(list)
	list = slices.DeleteFunc(list, func(c Conversation) bool { return c.ID == id })
	if len(list) == n {
		return conch.Errorf(conch.KindNotFound, "no conversation %q", id)
	}
	return cs.save(ctx, list)
}

func cleanTitle(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", conch.Errorf(conch.KindInvalid, "the title is not valid UTF-8")
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > maxTitle {
		return "", conch.Errorf(conch.KindInvalid, "the title is longer than %d characters", maxTitle)
	}
	return s, nil
}
