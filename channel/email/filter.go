package email

import (
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-msgauth/authres"
	"golang.org/x/net/publicsuffix"
)

// verdict is what the channel does with a mail before the gateway sees it.
type verdict int

const (
	accept verdict = iota
	// dropLoop: our own mail, an automatic message, a list, a bounce:
	// answering could start a mail loop. Logged at info.
	dropLoop
	// dropUnknown: the gateway's admission refuses the sender. Dropped
	// silently (debug log).
	dropUnknown
	// dropSpoofed: an admitted address without the trusted server's DMARC
	// pass for its domain. Logged as a warning.
	dropSpoofed
	// dropRate: the sender went over the hourly limit. Logged as a warning.
	dropRate
)

func (v verdict) String() string {
	switch v {
	case accept:
		return "accept"
	case dropLoop:
		return "automatic or own mail"
	case dropUnknown:
		return "sender not allowed"
	case dropSpoofed:
		return "sender not authenticated"
	case dropRate:
		return "sender over the hourly limit"
	}
	return "unknown"
}

// automatic says why a mail must not be answered automatically (RFC 3834
// and the headers list software and autoresponders set), or "".
func automatic(h message.Header, from, own string) string {
	if strings.EqualFold(from, own) {
		return "from conch's own address"
	}
	local, _, _ := strings.Cut(from, "@")
	switch strings.ToLower(local) {
	case "mailer-daemon", "postmaster", "noreply", "no-reply", "donotreply", "do-not-reply":
		return "from " + local
	}
	if v := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted"))); v != "" && v != "no" {
		return "Auto-Submitted: " + v
	}
	switch strings.ToLower(strings.TrimSpace(h.Get("Precedence"))) {
	case "bulk", "list", "junk", "auto_reply":
		return "Precedence: " + h.Get("Precedence")
	}
	if h.Has("List-Id") {
		return "List-Id: " + h.Get("List-Id")
	}
	if h.Has("List-Unsubscribe") || h.Has("List-Post") {
		return "mailing list headers"
	}
	for _, k := range []string{"X-Autoreply", "X-Autorespond"} {
		if h.Has(k) {
			return k
		}
	}
	if rp := strings.TrimSpace(h.Get("Return-Path")); rp == "<>" {
		return "empty Return-Path (a bounce)"
	}
	ct := strings.ToLower(h.Get("Content-Type"))
	if strings.HasPrefix(ct, "multipart/report") {
		return "delivery or read report"
	}
	return ""
}

// authenticated checks the Authentication-Results of the trusted server
// (authserv-id trusted) for the From domain: a DMARC pass, or failing a
// DMARC result, a DKIM pass for a d= aligned with From, or an SPF pass for
// an aligned MAIL FROM. Only the topmost header with that authserv-id
// counts: it is the one the trusted server added on receipt (servers
// remove or sit above any copy a sender forged). It returns why a mail
// fails, or "".
func authenticated(h message.Header, trusted, fromDomain string) string {
	fields := h.FieldsByKey("Authentication-Results")
	for fields.Next() {
		v, err := fields.Text()
		if err != nil {
			v = fields.Value()
		}
		id, results, err := authres.Parse(v)
		if err != nil || !strings.EqualFold(id, trusted) {
			continue
		}
		var dmarc, dkim, spf bool
		sawDMARC := false
		for _, r := range results {
			switch r := r.(type) {
			case *authres.DMARCResult:
				sawDMARC = true
				dmarc = r.Value == authres.ResultPass && (r.From == "" || aligned(r.From, fromDomain))
			case *authres.DKIMResult:
				if r.Value == authres.ResultPass && aligned(r.Domain, fromDomain) {
					dkim = true
				}
			case *authres.SPFResult:
				if r.Value == authres.ResultPass && aligned(domainOf(r.From), fromDomain) {
					spf = true
				}
			}
		}
		switch {
		case dmarc:
			return ""
		case sawDMARC:
			return "dmarc did not pass at " + trusted
		case dkim || spf:
			return ""
		}
		return "no dmarc, aligned dkim or spf pass at " + trusted
	}
	return "no Authentication-Results from " + trusted
}

// domainOf is the domain of an address: the part after its last @ (a
// quoted local part may hold an @), as admission reads it.
func domainOf(s string) string {
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// aligned is DMARC's relaxed alignment: both domains have the same
// organisational domain (the public suffix plus one label).
func aligned(d, from string) bool {
	d, from = strings.ToLower(strings.TrimSuffix(d, ".")), strings.ToLower(strings.TrimSuffix(from, "."))
	if d == "" || from == "" {
		return false
	}
	if d == from {
		return true
	}
	od, err1 := publicsuffix.EffectiveTLDPlusOne(d)
	of, err2 := publicsuffix.EffectiveTLDPlusOne(from)
	return err1 == nil && err2 == nil && od == of
}

// rateLimiter counts handled mails per sender over a sliding window.
type rateLimiter struct {
	max    int
	window time.Duration
	mu     sync.Mutex
	seen   map[string][]time.Time
}

func newRateLimiter(max int, window time.Duration) *rateLimiter {
	return &rateLimiter{max: max, window: window, seen: map[string][]time.Time{}}
}

// allow records a mail from sender at now and reports whether it is within the limit.
func (r *rateLimiter) allow(sender string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Forget what left the window, so the map stays small.
	for s, ts := range r.seen {
		keep := ts[:0]
		for _, t := range ts {
			if now.Sub(t) < r.window {
				keep = append(keep, t)
			}
		}
		if len(keep) == 0 {
			delete(r.seen, s)
		} else {
			r.seen[s] = keep
		}
	}
	if len(r.seen[sender]) >= r.max {
		return false
	}
	r.seen[sender] = append(r.seen[sender], now)
	return true
}
