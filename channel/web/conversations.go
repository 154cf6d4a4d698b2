package web

import (
	"context"
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

// ConversationStore keeps the person's web conversations, one row each:
// every change is one statement, safe when another process writes the store
// too. sqlite.DB satisfies it; NewMemConversations keeps them in memory.
type ConversationStore interface {
	// WebConversations lists them, oldest first.
	WebConversations(ctx context.Context) ([]conch.WebConversation, error)
	// WebConversation returns one; ok is false when there is none.
	WebConversation(ctx context.Context, id string) (c conch.WebConversation, ok bool, err error)
	// CreateWebConversation adds c at the end and returns it as stored: an
	// empty title becomes "Conversation <n>", n counting it.
	CreateWebConversation(ctx context.Context, c conch.WebConversation) (conch.WebConversation, error)
	// RenameWebConversation and DeleteWebConversation report ok = false
	// when there is no such conversation.
	RenameWebConversation(ctx context.Context, id, title string) (ok bool, err error)
	DeleteWebConversation(ctx context.Context, id string) (ok bool, err error)
}

// conversations is the person's list of web conversations.
type conversations struct {
	store ConversationStore
	now   func() time.Time
}

func fromStored(c conch.WebConversation) Conversation {
	return Conversation{ID: c.ID, Title: c.Title, Created: c.Created}
}

// List returns the conversations, newest first.
func (cs *conversations) List(ctx context.Context) ([]Conversation, error) {
	stored, err := cs.store.WebConversations(ctx)
	if err != nil {
		return nil, fmt.Errorf("web conversations: %w", err)
	}
	list := make([]Conversation, 0, len(stored))
	for _, c := range slices.Backward(stored) {
		list = append(list, fromStored(c))
	}
	return list, nil
}

// Get returns one conversation; KindNotFound when there is none.
func (cs *conversations) Get(ctx context.Context, id string) (Conversation, error) {
	c, ok, err := cs.store.WebConversation(ctx, id)
	if err != nil {
		return Conversation{}, fmt.Errorf("web conversations: %w", err)
	}
	if !ok {
		return Conversation{}, conch.Errorf(conch.KindNotFound, "no conversation %q", id)
	}
	return fromStored(c), nil
}

// Create adds a conversation with a fresh id.
func (cs *conversations) Create(ctx context.Context, title string) (Conversation, error) {
	title, err := cleanTitle(title)
	if err != nil {
		return Conversation{}, err
	}
	c, err := cs.store.CreateWebConversation(ctx, conch.WebConversation{
		ID: "c" + strings.ToLower(randomToken(9)), Title: title, Created: cs.now().UTC().Truncate(time.Second),
	})
	if err != nil {
		return Conversation{}, fmt.Errorf("web conversations: %w", err)
	}
	return fromStored(c), nil
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
	ok, err := cs.store.RenameWebConversation(ctx, id, title)
	if err != nil {
		return Conversation{}, fmt.Errorf("web conversations: %w", err)
	}
	if !ok {
		return Conversation{}, conch.Errorf(conch.KindNotFound, "no conversation %q", id)
	}
	return cs.Get(ctx, id)
}

// Delete removes a conversation from the list.
func (cs *conversations) Delete(ctx context.Context, id string) error {
	ok, err := cs.store.DeleteWebConversation(ctx, id)
	if err != nil {
		return fmt.Errorf("web conversations: %w", err)
	}
	if !ok {
		return conch.Errorf(conch.KindNotFound, "no conversation %q", id)
	}
	return nil
}

// memConversations is a ConversationStore in memory (tests, and a web
// chat without a store).
type memConversations struct {
	mu   sync.Mutex
	list []conch.WebConversation
}

// NewMemConversations returns a ConversationStore in memory, for tests.
func NewMemConversations() ConversationStore { return &memConversations{} }

func (m *memConversations) WebConversations(context.Context) ([]conch.WebConversation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.list), nil
}

func (m *memConversations) WebConversation(_ context.Context, id string) (conch.WebConversation, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.indexLocked(id)
	if i < 0 {
		return conch.WebConversation{}, false, nil
	}
	return m.list[i], true, nil
}

func (m *memConversations) CreateWebConversation(_ context.Context, c conch.WebConversation) (conch.WebConversation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.ID == "" || m.indexLocked(c.ID) >= 0 {
		return conch.WebConversation{}, conch.Errorf(conch.KindInvalid, "conversation id %q is empty or taken", c.ID)
	}
	if c.Title == "" {
		c.Title = "Conversation " + fmt.Sprint(len(m.list)+1)
	}
	m.list = append(m.list, c)
	return c, nil
}

func (m *memConversations) RenameWebConversation(_ context.Context, id, title string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.indexLocked(id)
	if i >= 0 {
		m.list[i].Title = title
	}
	return i >= 0, nil
}

func (m *memConversations) DeleteWebConversation(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.indexLocked(id)
	if i >= 0 {
		m.list = slices.Delete(m.list, i, i+1)
	}
	return i >= 0, nil
}

func (m *memConversations) indexLocked(id string) int {
	return slices.IndexFunc(m.list, func(c conch.WebConversation) bool { return c.ID == id })
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
