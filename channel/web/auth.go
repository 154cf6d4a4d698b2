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

// Cursors is the part of the store the web chat keeps its state in (login
// tokens, the session key, the conversation list). conch.CursorStore
// satisfies it; every name starts with "web:".
type Cursors interface {
	Cursor(ctx context.Context, name string) (string, error)
	SetCursor(ctx context.Context, name, value string) error
}

// Cursor names.
const (
	cursorSessionKey = "web:session-key"
	cursorLogin      = "web:login:" // + sha256 of the token, hex
	cursorConvs      = "web:conversations"
)

// Default lifetimes.
const (
	DefaultLoginTTL   = 10 * time.Minute
	DefaultSessionTTL = 30 * 24 * time.Hour
)

// ErrLogin says a login link is unknown, used or expired. It is the only
// answer a login attempt gets, so a guesser learns nothing.
var ErrLogin = errors.New("this login link is invalid, already used or expired: run `conch web url` for a new one")

// Auth issues single-use login tokens and checks session cookies.
//
// There are no accounts: whoever holds a login link (printed by `conch up`
// and `conch web url` to the operator) becomes the owner's session. A
// session cookie is "<id>.<expiry>.<mac>", the MAC keyed with the session
// key kept in the store; LogoutAll replaces the key, which ends every
// session at once, also in a running conch (the key is read from the store
// at every check, so another process can revoke).
type Auth struct {
	store      Cursors
	loginTTL   time.Duration
	sessionTTL time.Duration
	now        func() time.Time

	mu sync.Mutex // serialises redeeming and key creation
}

// NewAuth returns an Auth over store. Zero TTLs take the defaults; now nil
// means time.Now.
func NewAuth(store Cursors, loginTTL, sessionTTL time.Duration, now func() time.Time) *Auth {
	if loginTTL <= 0 {
		loginTTL = DefaultLoginTTL
	}
	if sessionTTL <= 0 {
		sessionTTL = DefaultSessionTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Auth{store: store, loginTTL: loginTTL, sessionTTL: sessionTTL, now: now}
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

// Redeem uses up a login token and returns a new session cookie value and
// its expiry. Any failure of the token itself is ErrLogin.
func (a *Auth) Redeem(ctx context.Context, token string) (string, time.Time, error) {
	if len(token) < 20 || len(token) > 100 {
		return "", time.Time{}, ErrLogin
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	name := cursorLogin + tokenHash(token)
	v, err := a.store.Cursor(ctx, name)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("login: %w", err)
	}
	exp, perr := strconv.ParseInt(v, 10, 64)
	if v == "" || perr != nil {
		return "", time.Time{}, ErrLogin // unknown or used
	}
	// Used up before anything else, so it works once even if what follows fails.
	if err := a.store.SetCursor(ctx, name, "used "+a.now().UTC().Format(time.RFC3339)); err != nil {
		return "", time.Time{}, fmt.Errorf("login: %w", err)
	}
	if a.now().UnixMilli() > exp {
		return "", time.Time{}, ErrLogin
	}
	key, err := a.sessionKey(ctx, true)
	if err != nil {
		return "", time.Time{}, err
	}
	expires := a.now().Add(a.sessionTTL).Truncate(time.Second)
	body := randomToken(16) + "." + strconv.FormatInt(expires.Unix(), 10)
	return body + "." + mac(key, body), expires, nil
}

// Check reports whether cookie is a live session.
func (a *Auth) Check(ctx context.Context, cookie string) (bool, error) {
	i := strings.LastIndexByte(cookie, '.')
	if i < 0 || len(cookie) > 200 {
		return false, nil
	}
	body, sum := cookie[:i], cookie[i+1:]
	_, expS, ok := strings.Cut(body, ".")
	if !ok {
		return false, nil
	}
	exp, err := strconv.ParseInt(expS, 10, 64)
	if err != nil || a.now().Unix() > exp {
		return false, nil
	}
	key, err := a.sessionKey(ctx, false)
	if err != nil || key == "" {
		return false, err
	}
	return hmac.Equal([]byte(sum), []byte(mac(key, body))), nil
}

// LogoutAll ends every session by replacing the session key.
func (a *Auth) LogoutAll(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.store.SetCursor(ctx, cursorSessionKey, randomToken(32)); err != nil {
		return fmt.Errorf("logout all: %w", err)
	}
	return nil
}

// sessionKey reads the key, creating it when asked and absent (a.mu held).
func (a *Auth) sessionKey(ctx context.Context, create bool) (string, error) {
	k, err := a.store.Cursor(ctx, cursorSessionKey)
	if err != nil {
		return "", fmt.Errorf("session key: %w", err)
	}
	if k == "" && create {
		k = randomToken(32)
		if err := a.store.SetCursor(ctx, cursorSessionKey, k); err != nil {
			return "", fmt.Errorf("session key: %w", err)
		}
	}
	return k, nil
}

func mac(key, body string) string {
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
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
