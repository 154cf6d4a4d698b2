package netpolicy

import (
	"net/netip"
	"net/url"
	"strings"

	"golang.org/x/net/idna"
)

// CheckURL checks what can be checked before any name is resolved: the
// scheme (http, https), no userinfo, and the host (CheckHost). It returns the
// host in the form that will be resolved.
func (p Policy) CheckURL(u *url.URL) (string, error) {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return "", &RefusedError{Target: u.String(), Reason: "no scheme: use an http:// or https:// URL"}
	default:
		return "", &RefusedError{Target: u.Scheme + ":", Reason: "only http and https URLs can be fetched"}
	}
	if u.Opaque != "" {
		return "", &RefusedError{Target: u.String(), Reason: "not a hierarchical URL"}
	}
	if u.User != nil {
		return "", &RefusedError{Target: u.Redacted(), Reason: "URLs with a user name or password are refused"}
	}
	if strings.ContainsAny(u.Host, "@\\") {
		return "", &RefusedError{Target: u.Host, Reason: "ambiguous host"}
	}
	if port := u.Port(); port != "" {
		if n, ok := parseDecimal(port); !ok || n == 0 || n > 65535 {
			return "", &RefusedError{Target: u.Host, Reason: "invalid port"}
		}
	}
	return p.CheckHost(u.Hostname())
}

// CheckHost refuses, by name and before resolving: an empty host,
// localhost and *.localhost (with or without a trailing dot, in any case or
// Unicode spelling), and numeric hosts in any form but the canonical one
// (127.1, 2130706433, 0x7f.0.0.1, 0177.0.0.1, 127.0.0.1.), whose meaning
// differs between resolvers. A canonical IP literal is checked against the
// address tables at once. It returns the host in ASCII (IDNA) form.
func (p Policy) CheckHost(host string) (string, error) {
	if host == "" {
		return "", &RefusedError{Target: "(empty host)", Reason: "a URL needs a host"}
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Is4() && addr.String() != host {
			return "", &RefusedError{Target: host, Reason: "non-canonical numeric host"}
		}
		if err := p.CheckAddr(addr); err != nil {
			return "", err
		}
		return host, nil
	}
	if strings.Contains(host, ":") || strings.Contains(host, "%") {
		return "", &RefusedError{Target: host, Reason: "not a valid IPv6 literal"}
	}
	ascii, err := idna.Lookup.ToASCII(host)
	if err != nil {
		// A name that is not valid IDNA cannot be a public host name; the
		// pure-ASCII form is what a lenient resolver would look up.
		return "", &RefusedError{Target: host, Reason: "invalid host name"}
	}
	name := strings.ToLower(ascii)
	trimmed := strings.TrimSuffix(name, ".")
	if trimmed == "" || strings.HasSuffix(trimmed, ".") || strings.Contains(trimmed, "..") {
		return "", &RefusedError{Target: host, Reason: "invalid host name"}
	}
	if trimmed == "localhost" || strings.HasSuffix(trimmed, ".localhost") {
		return "", &RefusedError{Target: host, Reason: "localhost"}
	}
	if looksNumeric(trimmed) {
		if addr, err := netip.ParseAddr(trimmed); err == nil && addr.Is4() && trimmed != name {
			return "", &RefusedError{Target: host, Reason: "numeric host with a trailing dot"}
		}
		return "", &RefusedError{Target: host, Reason: "non-canonical numeric host"}
	}
	return name, nil
}

// looksNumeric reports whether a resolver or browser could read host as an
// IPv4 address (the WHATWG "ends in a number" rule): its last label is
// decimal, octal or 0x-hex digits.
func looksNumeric(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	if rest, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(rest, "0123456789abcdef") == ""
	}
	return false
}

func parseDecimal(s string) (int, bool) {
	if s == "" || len(s) > 12 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
