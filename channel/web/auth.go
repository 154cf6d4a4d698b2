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
	"strings"
	"sync"
	"time"

	"conch"
)

// Logins keeps the single-use login tokens (SHA-256 hashes only) until they
// are used or expire (the store's janitor deletes expired ones). sqlite.DB
// satisfies it; NewMemLogins keeps them in memory.
type Logins interface {
	// CreateWebLogin stores a new token's hash and expiry.
	CreateWebLogin(ctx context.Context, tokenHash string, expires time.Time) error
	// TakeWebLogin deletes a token's hash and returns its expiry; ok is
	// false when there was none (unknown or used). It is one statement, so
	// a token is taken once, also when two processes try.
	TakeWebLogin(ctx context.Context, tokenHash string) (expires time.Time, ok bool, err error)
}

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
	logins     Logins
	sessions   Sessions
	loginTTL   time.Duration
	sessionTTL time.Duration
	now        func() time.Time
}

// NewAuth returns an Auth over logins (login tokens) and sessions. The
// lifetimes are the configuration's (web.login_ttl, web.session_ttl; their
// defaults are in config/default.toml); an Auth used only to log out may
// pass zero. now nil means time.Now.
func NewAuth(logins Logins, sessions Sessions, loginTTL, sessionTTL time.Duration, now func() time.Time) *Auth {
	if now == nil {
		now = time.Now
	}
	return &Auth{logins: logins, sessions: sessions, loginTTL: loginTTL, sessionTTL: sessionTTL, now: now}
}

// LoginTTL is how long a new login token is valid.
func (a *Auth) LoginTTL() time.Duration { return a.loginTTL }

// NewLoginToken creates a single-use login token. Only its hash is stored.
func (a *Auth) NewLoginToken(ctx context.Context) (string, error) {
	tok := randomToken(32)
	if err := a.logins.CreateWebLogin(ctx, tokenHash(tok), a.now().Add(a.loginTTL)); err != nil {
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
	// Used up before anything else, so it works once even if what follows fails.
	exp, ok, err := a.logins.TakeWebLogin(ctx, tokenHash(token))
	if err != nil {
		return Session{}, fmt.Errorf("login: %w", err)
	}
	if !ok {
		return Session{}, ErrLogin // unknown or used
	}
	if a.now().UnixMilli() > exp.UnixMilli() {
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

// memLogins is Logins in memory (tests and the fake).
type memLogins struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// NewMemLogins returns Logins in memory, for tests.
func NewMemLogins() Logins { return &memLogins{m: map[string]time.Time{}} }

func (l *memLogins) CreateWebLogin(_ context.Context, hash string, expires time.Time) error {
	if hash == "" {
		return conch.Errorf(conch.KindInvalid, "login token hash is empty")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[hash] = expires
	return nil
}

func (l *memLogins) TakeWebLogin(_ context.Context, hash string) (time.Time, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	exp, ok := l.m[hash]
	delete(l.m, hash)
	return exp, ok, nil
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
