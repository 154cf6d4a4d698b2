package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"conch"
	"conch/npmpin"
)

// MCPServerConfig is one MCP server. Exactly one of Command (a stdio
// server, run inside each conversation's sandbox) and URL (a remote server,
// reached from the host) is set.
type MCPServerConfig struct {
	// Name is the server's name in tool names (mcp__<name>__<tool>), logs,
	// metrics and `conch mcp` commands: lowercase letters, digits and '-'.
	Name string `toml:"name"`
	// Command and Args start a stdio server inside the conversation's
	// sandbox (a program of the sandbox image; never run on the host).
	Command string   `toml:"command"`
	Args    []string `toml:"args"`
	// Env adds KEY=value entries to a stdio server's environment (no
	// secrets: they would be inside the sandbox).
	Env []string `toml:"env"`
	// Package ("name@version") is an npm package built into the derived
	// sandbox image with its whole dependency tree, pinned by PackageLock
	// (a package-lock.json of `npm install --package-lock-only
	// --ignore-scripts name@version`: every tarball checked against its
	// sha512). Command then defaults to "mcp-<name>", the command that
	// runs the package's bin (Bin names it when it has several).
	Package     string `toml:"package"`
	PackageLock string `toml:"package_lock"`
	Bin         string `toml:"bin"`
	// EgressURL is the API a stdio server may reach (and only that): it
	// gets EgressURLEnv pointing at a bridge on the sandbox's loopback,
	// where conch's host-side proxy adds the secret of EgressSecretFile
	// as "<EgressHeader>: <EgressPrefix><secret>" (Authorization, "Bearer "
	// by default) and forwards to EgressURL. EgressSecretEnv, if set,
	// gets a placeholder: the secret never enters the sandbox.
	EgressURL        string  `toml:"egress_url"`
	EgressURLEnv     string  `toml:"egress_url_env"`
	EgressSecretFile string  `toml:"egress_secret_file"`
	EgressSecretEnv  string  `toml:"egress_secret_env"`
	EgressHeader     string  `toml:"egress_header"`
	EgressPrefix     *string `toml:"egress_prefix"`
	// URL is a remote server's endpoint (streamable HTTP, or SSE for older
	// servers).
	URL string `toml:"url"`
	// Transport is auto (streamable HTTP, then SSE), streamable or sse.
	Transport string `toml:"transport"`
	// TokenFile holds a bearer token sent to a remote server.
	TokenFile string `toml:"token_file"`
	// OAuth signs conch in to a remote server with OAuth 2.1 (`conch mcp
	// login NAME`, kept in the data dir); OAuthClientID and
	// OAuthClientSecretFile name a client registered with its
	// authorization server ("" registers one dynamically).
	OAuth                 bool   `toml:"oauth"`
	OAuthClientID         string `toml:"oauth_client_id"`
	OAuthClientSecretFile string `toml:"oauth_client_secret_file"`
	// AllowPrivate lets conch dial a remote server at a private or
	// special-purpose address (an intranet service); off, such addresses
	// are refused at connect time, as for web_fetch.
	AllowPrivate bool `toml:"allow_private"`
	// Include, when set, offers only these tools; Exclude hides tools.
	// Names are the server's own tool names.
	Include []string `toml:"include"`
	Exclude []string `toml:"exclude"`
	// Timeout bounds one call (and the start of the server); default 60s.
	Timeout Duration `toml:"timeout"`
	// Channels, when set, limits the server to conversations on these
	// channels; Conversations to these conversation keys ("telegram:42").
	Channels      []string `toml:"channels"`
	Conversations []string `toml:"conversations"`
}

var mcpNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,23}$`)

// Stdio reports whether the server runs as a stdio server in the sandbox.
func (s MCPServerConfig) Stdio() bool { return s.Command != "" || s.Package != "" }

// StdioCommand is the command that starts a stdio server: Command, or the
// pinned package's command.
func (s MCPServerConfig) StdioCommand() string {
	if s.Command == "" && s.Package != "" {
		return "mcp-" + s.Name
	}
	return s.Command
}

// Install is the pinned package's install in the derived sandbox image
// (ok false when the server has no Package).
func (s MCPServerConfig) Install() (npmpin.Install, bool, error) {
	if s.Package == "" {
		return npmpin.Install{}, false, nil
	}
	i := strings.LastIndex(s.Package, "@")
	if i <= 0 || i == len(s.Package)-1 {
		return npmpin.Install{}, true, fmt.Errorf("package %q: want name@version", s.Package)
	}
	if s.PackageLock == "" {
		return npmpin.Install{}, true, errors.New("a package needs its package_lock (npm install --package-lock-only --ignore-scripts NAME@VERSION writes one)")
	}
	lock, err := os.ReadFile(s.PackageLock)
	if err != nil {
		return npmpin.Install{}, true, err
	}
	in, err := npmpin.FromLock("mcp-"+s.Name, "mcp-"+s.Name, s.Package[:i], s.Package[i+1:], s.Bin, lock)
	return in, true, err
}

// LoadToken reads TokenFile ("" when none is configured).
func (s MCPServerConfig) LoadToken() (string, error) {
	if s.TokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(s.TokenFile)
	if err != nil {
		return "", fmt.Errorf("mcp server %s: token_file: %w", s.Name, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("mcp server %s: token_file %s is empty", s.Name, s.TokenFile)
	}
	return tok, nil
}

// LoadEgressSecret reads EgressSecretFile.
func (s MCPServerConfig) LoadEgressSecret() (string, error) {
	b, err := os.ReadFile(s.EgressSecretFile)
	if err != nil {
		return "", fmt.Errorf("mcp server %s: egress_secret_file: %w", s.Name, err)
	}
	sec := strings.TrimSpace(string(b))
	if sec == "" {
		return "", fmt.Errorf("mcp server %s: egress_secret_file %s is empty", s.Name, s.EgressSecretFile)
	}
	return sec, nil
}

// EgressHeaderAndPrefix are how the egress secret is sent.
func (s MCPServerConfig) EgressHeaderAndPrefix() (string, string) {
	h := s.EgressHeader
	if h == "" {
		h = "Authorization"
	}
	switch {
	case s.EgressPrefix != nil:
		return h, *s.EgressPrefix
	case strings.EqualFold(h, "Authorization"):
		return h, "Bearer "
	}
	return h, ""
}

// Server returns the configured server called name.
func (m MCPConfig) Server(name string) (MCPServerConfig, bool) {
	i := slices.IndexFunc(m.Servers, func(s MCPServerConfig) bool { return s.Name == name })
	if i < 0 {
		return MCPServerConfig{}, false
	}
	return m.Servers[i], true
}

func (m MCPConfig) validateServers() []Problem {
	var ps []Problem
	seen := map[string]bool{}
	for i, s := range m.Servers {
		key := fmt.Sprintf("mcp.servers[%d]", i)
		if s.Name != "" {
			key = fmt.Sprintf("mcp.servers[%s]", s.Name)
		}
		add := func(field, msg, fix string) { ps = append(ps, Problem{key + "." + field, msg, fix}) }
		switch {
		case !mcpNameRE.MatchString(s.Name):
			add("name", fmt.Sprintf("%q is not a usable server name", s.Name), "use 1-24 lowercase letters, digits and '-', starting with a letter or digit (it becomes part of tool names)")
		case seen[s.Name]:
			add("name", fmt.Sprintf("server %q is configured twice", s.Name), "give each [[mcp.servers]] its own name")
		}
		seen[s.Name] = true
		if s.Stdio() == (s.URL != "") {
			add("command", "want exactly one of command (a stdio server in the sandbox) and url (a remote server)", "set command = \"...\" with args, or url = \"https://...\"")
		}
		if s.URL != "" && s.EgressURL != "" {
			add("egress_url", "a remote server needs no egress (conch dials it from the host)", "remove egress_url")
		}
		if s.URL != "" {
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				add("url", fmt.Sprintf("%q is not an http(s) URL", s.URL), "set the server's endpoint, e.g. https://mcp.example.com/mcp")
			}
			switch s.Transport {
			case "", "auto", "streamable", "sse":
			default:
				add("transport", fmt.Sprintf("unknown transport %q", s.Transport), "use auto, streamable or sse")
			}
			if _, err := s.LoadToken(); err != nil {
				add("token_file", err.Error(), "point token_file at a readable file holding the bearer token")
			}
			if s.OAuth && s.TokenFile != "" {
				add("oauth", "a server signs in with OAuth or a token file, not both", "remove token_file or oauth")
			}
			if s.OAuthClientSecretFile != "" {
				if _, err := os.ReadFile(s.OAuthClientSecretFile); err != nil {
					add("oauth_client_secret_file", err.Error(), "point it at a readable file, or remove it for a public client")
				}
			}
		}
		if _, ok, err := s.Install(); ok && err != nil {
			add("package", err.Error(), "pin the package as name@version with package_lock pointing at its package-lock.json")
		}
		if s.Stdio() {
			if s.TokenFile != "" {
				add("token_file", "a stdio server gets no token (it runs inside the sandbox, where no secret goes)", "remove token_file")
			}
			if s.AllowPrivate {
				add("allow_private", "a stdio server has no network", "remove allow_private")
			}
			if s.OAuth {
				add("oauth", "a stdio server signs in to nothing (it runs inside the sandbox, where no secret goes)", "remove oauth; use egress settings for its API")
			}
			if s.EgressURL != "" {
				u, err := url.Parse(s.EgressURL)
				if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
					add("egress_url", fmt.Sprintf("%q is not an http(s) URL without credentials", s.EgressURL), "set the API's base URL, e.g. https://api.github.com")
				}
				if s.EgressURLEnv == "" {
					add("egress_url_env", "the server must be told where its API is", "name the variable the server reads its API's base URL from")
				}
				if _, err := s.LoadEgressSecret(); err != nil {
					add("egress_secret_file", err.Error(), "point egress_secret_file at a readable file holding the API's secret")
				}
			} else if s.EgressURLEnv != "" || s.EgressSecretFile != "" || s.EgressSecretEnv != "" {
				add("egress_url", "egress settings without egress_url", "set egress_url to the API the server may reach, or remove the egress settings")
			}
			for _, e := range s.Env {
				if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
					add("env", fmt.Sprintf("%q is not KEY=value", e), "write env entries as KEY=value")
				}
			}
		}
		if s.Timeout.D() < 0 {
			add("timeout", "must not be negative", "set a duration like 60s, or leave it out for the default")
		}
		for _, c := range s.Channels {
			if c == "" || strings.ContainsAny(c, ": ") {
				add("channels", fmt.Sprintf("%q is not a channel name", c), "list channel names like telegram, matrix, web, cli")
			}
		}
		for _, c := range s.Conversations {
			if _, err := conch.ParseConversationKey(c); err != nil {
				add("conversations", fmt.Sprintf("%q is not a conversation key", c), "list keys like telegram:12345 (see `conch transcript`)")
			}
		}
		for _, t := range s.Include {
			if slices.Contains(s.Exclude, t) {
				add("exclude", fmt.Sprintf("tool %q is both included and excluded", t), "list it in one of include and exclude")
			}
		}
	}
	return ps
}
