package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
)

// WebConfig configures the built-in web chat and dashboard, served on
// gateway.listen. Owned by the web channel's authors.
type WebConfig struct {
	// Enabled turns the web chat and dashboard on (default true). They
	// need gateway.listen.
	Enabled bool `toml:"enabled" env:"ENABLED"`
	// PublicURL is the address people open (behind a reverse proxy, e.g.
	// https://conch.example.org); "" means the listener's own address.
	// Login links are printed with it.
	PublicURL string `toml:"public_url" env:"PUBLIC_URL"`
	// TLSCert and TLSKey serve HTTPS on gateway.listen.
	TLSCert string `toml:"tls_cert" env:"TLS_CERT"`
	TLSKey  string `toml:"tls_key" env:"TLS_KEY"`
	// AllowInsecure permits plain HTTP on a non-loopback address (for a
	// trusted network or a TLS-terminating proxy in front).
	AllowInsecure bool `toml:"allow_insecure" env:"ALLOW_INSECURE"`
	// LoginTTL is how long a login link from `conch web url` works (once).
	LoginTTL Duration `toml:"login_ttl" env:"LOGIN_TTL"`
	// SessionTTL is how long a browser stays logged in.
	SessionTTL Duration `toml:"session_ttl" env:"SESSION_TTL"`
	// MaxMessageBytes caps one message typed in the browser.
	MaxMessageBytes int `toml:"max_message_bytes" env:"MAX_MESSAGE_BYTES"`
}

// MetricsConfig configures the Prometheus endpoint.
type MetricsConfig struct {
	// Listen, if set, serves /metrics without login on its own address
	// (for a scraper); /metrics on gateway.listen always needs the login.
	Listen string `toml:"listen" env:"LISTEN"`
	// Pprof serves Go's runtime profiles (/debug/pprof/: heap, goroutines,
	// allocations, CPU) on Listen, for the operator finding what holds
	// memory; Listen must then be a loopback address.
	Pprof bool `toml:"pprof" env:"PPROF"`
}

// IsLoopback reports whether a listen address only accepts connections
// from this machine ("127.0.0.1:8484", "[::1]:8484", "localhost:8484").
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TLS reports whether the web listener serves HTTPS.
func (w WebConfig) TLS() bool { return w.TLSCert != "" }

func (c *Config) validateWebChat() []Problem {
	w := c.Web
	var ps []Problem
	add := func(key, msg, fix string) { ps = append(ps, Problem{key, msg, fix}) }
	if w.LoginTTL.D() <= 0 {
		add("web.login_ttl", "must be positive", `set a short duration, e.g. "10m"`)
	}
	if w.SessionTTL.D() <= 0 {
		add("web.session_ttl", "must be positive", `set a duration, e.g. "720h"`)
	}
	if w.MaxMessageBytes < 1 || w.MaxMessageBytes > 1<<20 {
		add("web.max_message_bytes", fmt.Sprintf("%d is out of range", w.MaxMessageBytes), "set a size between 1 and 1048576, e.g. 65536")
	}
	if (w.TLSCert == "") != (w.TLSKey == "") {
		add("web.tls_cert", "tls_cert and tls_key must be set together", "set both web.tls_cert and web.tls_key (PEM files), or neither")
	}
	for key, p := range map[string]string{"web.tls_cert": w.TLSCert, "web.tls_key": w.TLSKey} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			add(key, fmt.Sprintf("cannot read %s", p), "point it at a PEM file conch can read")
		}
	}
	if w.PublicURL != "" {
		if u, err := url.Parse(w.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("web.public_url", fmt.Sprintf("%q is not an http(s) URL", w.PublicURL), "use the address people open, e.g. https://conch.example.org")
		}
	}
	listen := c.Gateway.Listen
	if w.Enabled && listen != "" {
		if _, _, err := net.SplitHostPort(listen); err != nil {
			add("gateway.listen", fmt.Sprintf("%q is not host:port", listen), `use e.g. "127.0.0.1:8484"`)
		} else if !IsLoopback(listen) && !w.TLS() && !w.AllowInsecure {
			add("gateway.listen", fmt.Sprintf("%s accepts connections from other machines, but the web chat would serve them over plain HTTP (logins and conversations readable on the network)", listen),
				"set web.tls_cert and web.tls_key, or listen on 127.0.0.1 behind a TLS proxy, or set web.allow_insecure = true if the network is trusted")
		}
	}
	if m := c.Metrics.Listen; m != "" {
		if _, _, err := net.SplitHostPort(m); err != nil {
			add("metrics.listen", fmt.Sprintf("%q is not host:port", m), `use e.g. "127.0.0.1:9484", or leave it empty to serve /metrics behind the web login`)
		} else if strings.EqualFold(m, listen) {
			add("metrics.listen", "is the same address as gateway.listen", "use another port, or leave it empty to serve /metrics on gateway.listen behind the login")
		}
	}
	if c.Metrics.Pprof && (c.Metrics.Listen == "" || !IsLoopback(c.Metrics.Listen)) {
		add("metrics.pprof", "needs metrics.listen on a loopback address (profiles are served there, without login)",
			`set metrics.listen = "127.0.0.1:9484" and reach it through an SSH tunnel, or set metrics.pprof = false`)
	}
	return ps
}
