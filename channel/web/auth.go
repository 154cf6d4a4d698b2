package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"conch"
)

// Cursors is the part of the store the web chat keeps its login tokens in.
// conch.CursorStore satisfies it; every name starts with "web:".
type Cursors interface {
	Cursor(ctx context.Context, name string) (string, error)
	SetCursor(ctx context.Context, name, value string) error
}

// Cursor names.
const (
	cursorLogin = "web:login:" // + sha256 of the token, hex
)

// Sessions keeps the web sessions on the server, so that one can be
// revoked (log out) or all of them (`conch web logout-all`), also from
// another process. Only hashes of a session's secrets are stored.
// sqlite.DB satisfies it; NewMemSessions is one in memory.
type Sessions interface {
	// CreateWebSession stores a new session.
	CreateWebSession(ctx context.Context, id, secretHash, tokenHash string, expires time.Time) error
	// WebSession returns a session's hashes and expiry; empty hashes when
	// there is no such session.
	WebSession(ctx context.Context, id string) (secretHash, tokenHash string, expires time.Time, err error)
	// DeleteWebSession ends one session; DeleteWebSessions ends them all.
	DeleteWebSession(ctx context.Context, id string) error
	DeleteWebSessions(ctx context.Context) error
	// PruneWebSessions deletes the sessions expired at now.
	PruneWebSessions(ctx context.Context, now time.Time) error
}

// Default lifetimes.
const (
	DefaultLoginTTL   = 10 * time.Minute
	DefaultSessionTTL = 30 * 24 * time.Hour
)

// ErrLogin says a login link is unknown, used or expired. It is the only
// answer a login attempt gets, so a guesser learns nothing.
var ErrLogin = errors.New("this login link is invalid, already used or expired: run `conch web url` for a new one")

// Auth issues single-use login tokens and checks sessions.
//
// There are no accounts: whoever holds a login link (printed by `conch up`
// and `conch web url` to the operator) becomes the owner's session. A
// session has two credentials, both needed by every request:
//
//   - the cookie, "<id>.<secret>" (HttpOnly). Cookies are not scoped by
//     port and SameSite counts other ports of the host as the same site, so
//     any page served on this machine can make the browser send it, and a
//     server behind such a page receives it;
//   - the request token, which the page gets once, in the answer to the
//     login link, and keeps in its origin's localStorage (scoped by scheme,
//     host and port). It travels as the X-Conch-Token header, or in a
//     WebSocket's subprotocol list (tokenProtocolPrefix + token), which a
//     page of another origin cannot read or guess.
//
// Sessions are stored (hashed) through Sessions: log out deletes one,
// LogoutAll all of them, expired ones are pruned at each login and hourly.
type Auth struct {
	store      Cursors
	sessions   Sessions
	loginTTL   time.Duration
	sessionTTL time.Duration
	now        func() time.Time

	mu sync.Mutex // serialises redeeming
}

// NewAuth returns an Auth over store (login tokens) and sessions. Zero TTLs
// take the defaults; now nil means time.Now.
func NewAuth(store Cursors, sessions Sessions, loginTTL, sessionTTL time.Duration, now func() time.Time) *Auth {
	if loginTTL <= 0 {
		loginTTL = DefaultLoginTTL
	}
	if sessionTTL <= 0 {
		sessionTTL = DefaultSessionTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Auth{store: store, sessions: sessions, loginTTL: loginTTL, sessionTTL: sessionTTL, now: now}
}

// LoginTTL is how long a new login token is valid.
func (a *Auth) LoginTTL() time.Duration { return a.loginTTL }

// NewLoginToken creates a single-use login token. Only its hash is stored.
func (a *Auth) NewLoginToken(ctx context.Context) (string, error) {
	tok := randomToken(32)
	exp := a.now().Add(a.loginTTL).UnixMilli()
	if err := a.store.SetCursor(ctx, cursorLogin+tokenHash(tok), strconv.FormatInt(exp, 10)); err != nil {
		return "", fmt.Errorf("new login token: %w", err)
	}
	return tok, nil
}

// Session is a new session's credentials: the cookie's value, the request
// token the page sends with every request, and the expiry.
type Session struct {
	Cookie  string
	Token   string
	Expires time.Time
}

// Redeem uses up a login token and starts a new session. Any failure of the
// token itself is ErrLogin.
func (a *Auth) Redeem(ctx context.Context, token string) (Session, error) {
	if len(token) < 20 || len(token) > 100 {
		return Session{}, ErrLogin
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	name := cursorLogin + tokenHash(token)
	v, err := a.store.Cursor(ctx, name)
	if err != nil {
		return Session{}, fmt.Errorf("login: %w", err)
	}
	exp, perr := strconv.ParseInt(v, 10, 64)
	if v == "" || perr != nil {
		return Session{}, ErrLogin // unknown or used
	}
	// Used up before anything else, so it works once even if what follows fails.
	if err := a.store.SetCursor(ctx, name, "used "+a.now().UTC().Format(time.RFC3339)); err != nil {
		return Session{}, fmt.Errorf("login: %w", err)
	}
	if a.now().UnixMilli() > exp {
		return Session{}, ErrLogin
	}
	if err := a.sessions.PruneWebSessions(ctx, a.now()); err != nil {
		return Session{}, fmt.Errorf("login: %w", err)
	}
	id, secret := randomToken(16), randomToken(32)
	s := Session{Cookie: id + "." + secret, Token: randomToken(32), Expires: a.now().Add(a.sessionTTL).Truncate(time.Second)}
	if err := a.sessions.CreateWebSession(ctx, id, tokenHash(secret), tokenHash(s.Token), s.Expires); err != nil {
		return Session{}, fmt.Errorf("login: %w", err)
	}
	return s, nil
}

// Check reports whether cookie and token are a live session's.
func (a *Auth) Check(ctx context.Context, cookie, token string) (bool, error) {
	s, err := a.session(ctx, cookie)
	if err != nil || s.id == "" || token == "" || len(token) > 100 {
		return false, err
	}
	return hmac.Equal([]byte(s.tokenHash), []byte(tokenHash(token))), nil
}

type storedSession struct{ id, tokenHash string }

// session finds the live session a cookie names (a zero one when none).
func (a *Auth) session(ctx context.Context, cookie string) (storedSession, error) {
	id, secret, ok := strings.Cut(cookie, ".")
	if !ok || id == "" || secret == "" || len(cookie) > 200 {
		return storedSession{}, nil
	}
	sh, th, exp, err := a.sessions.WebSession(ctx, id)
	if err != nil {
		return storedSession{}, fmt.Errorf("check session: %w", err)
	}
	if sh == "" || !a.now().Before(exp) || !hmac.Equal([]byte(sh), []byte(tokenHash(secret))) {
		return storedSession{}, nil
	}
	return storedSession{id: id, tokenHash: th}, nil
}

// Logout ends the session of cookie (nothing when it is none).
func (a *Auth) Logout(ctx context.Context, cookie string) error {
	s, err := a.session(ctx, cookie)
	if err != nil || s.id == "" {
		return err
	}
	if err := a.sessions.DeleteWebSession(ctx, s.id); err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	return nil
}

// LogoutAll ends every session.
func (a *Auth) LogoutAll(ctx context.Context) error {
	if err := a.sessions.DeleteWebSessions(ctx); err != nil {
		return fmt.Errorf("logout all: %w", err)
	}
	return nil
}

// Prune deletes the expired sessions.
func (a *Auth) Prune(ctx context.Context) error {
	return a.sessions.PruneWebSessions(ctx, a.now())
}

func tokenHash(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// memCursors is a Cursors in memory (tests and the fake).
type memCursors struct {
	mu sync.Mutex
	m  map[string]string
}

// NewMemCursors returns an in-memory Cursors, for tests.
func NewMemCursors() Cursors { return &memCursors{m: map[string]string{}} }

func (c *memCursors) Cursor(_ context.Context, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name], nil
}

func (c *memCursors) SetCursor(_ context.Context, name, value string) error {
	if name == "" {
		return conch.Errorf(conch.KindInvalid, "cursor name is empty")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name] = value
	return nil
}

// memSessions is Sessions in memory (tests, and a web chat without a store).
type memSessions struct {
	mu sync.Mutex
	m  map[string]memSession
}

type memSession struct {
	secretHash, tokenHash string
	expires               time.Time
}

// NewMemSessions returns Sessions in memory, for tests.
func NewMemSessions() Sessions { return &memSessions{m: map[string]memSession{}} }

func (s *memSessions) CreateWebSession(_ context.Context, id, secretHash, tokenHash string, expires time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; ok || id == "" {
		return conch.Errorf(conch.KindInvalid, "session id is empty or taken")
	}
	s.m[id] = memSession{secretHash, tokenHash, expires}
	return nil
}

func (s *memSessions) WebSession(_ context.Context, id string) (string, string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := s.m[id]
	return ms.secretHash, ms.tokenHash, ms.expires, nil
}

func (s *memSessions) DeleteWebSession(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

func (s *memSessions) DeleteWebSessions(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.m)
	return nil
}

func (s *memSessions) PruneWebSessions(_ context.Context, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ms := range s.m {
		if !now.Before(ms.expires) {
			delete(s.m, id)
		}
	}
	return nil
}

func (s *memSessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
