package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"conch"
)

// Policy says who may talk to conch on a channel besides its allowlist.
type Policy string

// Policies (a channel's dm_policy).
const (
	// PolicyAllowlist admits only the allowlist (the default).
	PolicyAllowlist Policy = "allowlist"
	// PolicyPairing gives an unknown sender a one-time code (at most once an
	// hour) and nothing else; an operator approves it with `conch pairing
	// approve CODE`, and from then on the sender is admitted.
	PolicyPairing Policy = "pairing"
	// PolicyOpen admits everyone.
	PolicyOpen Policy = "open"
)

// CursorStore is where pairings are kept. *sqlite.DB satisfies it.
type CursorStore interface {
	Cursor(ctx context.Context, name string) (string, error)
	SetCursor(ctx context.Context, name, value string) error
}

// CursorLister lists cursors by prefix (for `conch pairing list`).
type CursorLister interface {
	CursorsWithPrefix(ctx context.Context, prefix string) (map[string]string, error)
}

const (
	pairApproved = "pairing:approved:" // + channel:id → Pairing
	pairCode     = "pairing:code:"     // + CODE → Pairing
	pairAsked    = "pairing:asked:"    // + channel:id → CODE
	// pairingEvery is how often an unknown sender gets a (new) code.
	pairingEvery = time.Hour
	codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789" // no 0/O, 1/I
	codeLength   = 8
)

// Pairing is one sender's pairing: a pending code or an approval.
type Pairing struct {
	Channel conch.ChannelName     `json:"channel"`
	Sender  conch.UserID          `json:"sender"`
	Name    string                `json:"name,omitempty"`
	Key     conch.ConversationKey `json:"-"`
	Conv    string                `json:"conversation"`
	Code    string                `json:"code,omitempty"`
	Created time.Time             `json:"created"`
	// Approved is zero for a pending code.
	Approved time.Time `json:"approved,omitzero"`
}

func senderRef(ch conch.ChannelName, id conch.UserID) string {
	return string(ch) + ":" + strings.ToLower(string(id))
}

// Pairings reads and changes the stored pairings.
type Pairings struct {
	Store CursorStore
	Now   func() time.Time
}

func (p Pairings) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p Pairings) get(ctx context.Context, name string) (Pairing, bool, error) {
	v, err := p.Store.Cursor(ctx, name)
	if err != nil || v == "" {
		return Pairing{}, false, err
	}
	var pr Pairing
	if err := json.Unmarshal([]byte(v), &pr); err != nil {
		return Pairing{}, false, fmt.Errorf("pairing %s: %w", name, err)
	}
	return pr, true, nil
}

func (p Pairings) put(ctx context.Context, name string, pr Pairing) error {
	b, err := json.Marshal(pr)
	if err != nil {
		return err
	}
	return p.Store.SetCursor(ctx, name, string(b))
}

// Approved reports whether any of ids was approved on the channel.
func (p Pairings) Approved(ctx context.Context, ch conch.ChannelName, ids ...conch.UserID) (bool, error) {
	for _, id := range ids {
		if id == "" {
			continue
		}
		if _, ok, err := p.get(ctx, pairApproved+senderRef(ch, id)); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// Request returns the sender's code and whether to send it now: a new code
// when the sender has none younger than an hour, else the current one and
// false (the sender was told already).
func (p Pairings) Request(ctx context.Context, in conch.Inbound) (code string, send bool, err error) {
	ref := senderRef(in.Key.Channel, in.Sender)
	if old, err := p.Store.Cursor(ctx, pairAsked+ref); err != nil {
		return "", false, err
	} else if old != "" {
		if pr, ok, err := p.get(ctx, pairCode+old); err != nil {
			return "", false, err
		} else if ok && p.now().Sub(pr.Created) < pairingEvery {
			return old, false, nil
		}
		_ = p.Store.SetCursor(ctx, pairCode+old, "") // expired
	}
	code, err = newCode()
	if err != nil {
		return "", false, err
	}
	pr := Pairing{Channel: in.Key.Channel, Sender: in.Sender, Name: in.SenderName, Key: in.Key, Conv: in.Key.String(), Code: code, Created: p.now().UTC()}
	if err := p.put(ctx, pairCode+code, pr); err != nil {
		return "", false, err
	}
	if err := p.Store.SetCursor(ctx, pairAsked+ref, code); err != nil {
		return "", false, err
	}
	return code, true, nil
}

// Approve approves the sender a code was given to.
func (p Pairings) Approve(ctx context.Context, code string) (Pairing, error) {
	code = strings.ToUpper(strings.TrimSpace(code))
	pr, ok, err := p.get(ctx, pairCode+code)
	if err != nil {
		return Pairing{}, err
	}
	if !ok || p.now().Sub(pr.Created) >= pairingEvery {
		return Pairing{}, conch.Errorf(conch.KindNotFound, "no pending pairing code %q (codes are valid for an hour; `conch pairing list` shows them)", code)
	}
	pr.Approved = p.now().UTC()
	if err := p.put(ctx, pairApproved+senderRef(pr.Channel, pr.Sender), pr); err != nil {
		return Pairing{}, err
	}
	_ = p.Store.SetCursor(ctx, pairCode+code, "")
	_ = p.Store.SetCursor(ctx, pairAsked+senderRef(pr.Channel, pr.Sender), "")
	return pr, nil
}

// Revoke withdraws an approval; it reports whether there was one.
func (p Pairings) Revoke(ctx context.Context, ch conch.ChannelName, id conch.UserID) (bool, error) {
	name := pairApproved + senderRef(ch, id)
	_, ok, err := p.get(ctx, name)
	if err != nil || !ok {
		return false, err
	}
	return true, p.Store.SetCursor(ctx, name, "")
}

// List returns approved senders and pending (unexpired) codes.
func (p Pairings) List(ctx context.Context, l CursorLister) (approved, pending []Pairing, err error) {
	for _, part := range []struct {
		prefix string
		dst    *[]Pairing
	}{{pairApproved, &approved}, {pairCode, &pending}} {
		m, err := l.CursorsWithPrefix(ctx, part.prefix)
		if err != nil {
			return nil, nil, err
		}
		for _, v := range m {
			if v == "" {
				continue
			}
			var pr Pairing
			if json.Unmarshal([]byte(v), &pr) != nil {
				continue
			}
			if part.prefix == pairCode && p.now().Sub(pr.Created) >= pairingEvery {
				continue
			}
			*part.dst = append(*part.dst, pr)
		}
		sort.Slice(*part.dst, func(i, j int) bool { return (*part.dst)[i].Created.Before((*part.dst)[j].Created) })
	}
	return approved, pending, nil
}

func newCode() (string, error) {
	b := make([]byte, codeLength)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("pairing code: %w", err)
	}
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b), nil
}

// pairingText is what an unknown sender is told.
func pairingText(code string) string {
	return fmt.Sprintf("I don't know you yet. Your pairing code is %s. Ask the operator of this conch to run\n\n"+
		"    conch pairing approve %s\n\nthen write again. The code is valid for an hour.", code, code)
}
