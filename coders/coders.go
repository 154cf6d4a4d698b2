// Package coders is the table of coding-agent CLIs conch can run behind
// its code tool: one entry per CLI holds every fact about it that more
// than one package needs (its name in coder.agent, the API it speaks, the
// variables it reads its key and base URL from, what it cannot do, its
// pinned npm packages and the driver profile that reads its screen).
// config validates against it, cmd/conch wires from it, egress takes its
// vendor, images/sandbox builds its image layout and terminal/coder
// completes its driver profile from it. Adding a CLI is one entry here
// (and, for a CLI unlike the known ones, a driver in terminal/coder).
//
// It is a leaf: it imports the standard library and npmpin only.
package coders

import (
	"fmt"
	"slices"
	"strings"

	"conch/npmpin"
)

// Vendor is the API a CLI speaks: it decides the credential header and the
// default upstream of conch's key-injecting egress.
type Vendor string

// The known vendors.
const (
	// Anthropic: the Messages API, key in x-api-key.
	Anthropic Vendor = "anthropic"
	// OpenAI: the Responses and Chat Completions APIs, key as
	// "Authorization: Bearer".
	OpenAI Vendor = "openai"
	// Gemini: the Gemini API, key in x-goog-api-key.
	Gemini Vendor = "gemini"
)

// DefaultBaseURL is the vendor's public API base URL ("" for an unknown
// vendor). OpenAI's includes its /v1, as the OpenAI SDKs' and Codex's do.
func (v Vendor) DefaultBaseURL() string {
	switch v {
	case Anthropic:
		return "https://api.anthropic.com"
	case OpenAI:
		return "https://api.openai.com/v1"
	case Gemini:
		return "https://generativelanguage.googleapis.com"
	}
	return ""
}

// CLI is one coding-agent CLI.
type CLI struct {
	// Name is its value of coder.agent and its command in the image.
	Name string
	// Title is how people call it ("Claude Code").
	Title string
	// Vendor is the API it speaks.
	Vendor Vendor
	// KeyEnv names the environment variable the CLI reads its API key
	// from (it gets egress's placeholder there).
	KeyEnv string
	// BaseURLEnv names the environment variable that points the CLI at
	// its API; "" when the base URL goes into its settings files instead
	// (the driver writes them).
	BaseURLEnv string
	// Command is the shell command line that starts it: its command in
	// the image with the arguments it always needs.
	Command string
	// NoAsk, when set, says why the CLI cannot keep its permission
	// prompts in conch's sandbox (coder.approvals = ask is refused).
	NoAsk string
	// Driver names the profile in terminal/coder that knows its settings
	// files, screen and keys.
	Driver string
	// Image installs it in the sandbox image; its Name is left empty (it
	// is the CLI's: use Install).
	Image npmpin.Install
}

// Install is how the CLI is put into the sandbox image.
func (c CLI) Install() npmpin.Install {
	i := c.Image.Clone()
	i.Name = c.Name
	return i
}

// CanAsk reports whether the CLI can run with coder.approvals = ask.
func (c CLI) CanAsk() bool { return c.NoAsk == "" }

// Table lists CLIs in their canonical order (image names and labels
// follow it).
type Table []CLI

// Lookup returns the CLI called name.
func (t Table) Lookup(name string) (CLI, bool) {
	i := slices.IndexFunc(t, func(c CLI) bool { return c.Name == name })
	if i < 0 {
		return CLI{}, false
	}
	return t[i], true
}

// Names lists the CLIs' names in order.
func (t Table) Names() []string {
	names := make([]string, len(t))
	for i, c := range t {
		names[i] = c.Name
	}
	return names
}

// Check reports the first entry that is incomplete or repeats a name.
func (t Table) Check() error {
	seen := map[string]bool{}
	for _, c := range t {
		if seen[c.Name] {
			return fmt.Errorf("coding CLI %q is listed twice", c.Name)
		}
		seen[c.Name] = true
		switch {
		case c.Vendor.DefaultBaseURL() == "":
			return fmt.Errorf("coding CLI %q: unknown vendor %q", c.Name, c.Vendor)
		case c.KeyEnv == "" || c.Command == "" || c.Driver == "" || c.Title == "":
			return fmt.Errorf("coding CLI %q: want a title, key variable, command and driver", c.Name)
		case c.Image.Name != "" && c.Image.Name != c.Name:
			return fmt.Errorf("coding CLI %q: its image install is named %q", c.Name, c.Image.Name)
		case strings.Fields(c.Command)[0] != c.Name:
			return fmt.Errorf("coding CLI %q: command %q does not start with its name (its command in the image)", c.Name, c.Command)
		}
		if err := c.Install().Check(); err != nil {
			return fmt.Errorf("coding CLI %q: %w", c.Name, err)
		}
	}
	return nil
}

// Builtin returns the CLIs conch knows: a fresh copy each call. Their
// versions are chosen here (checked against the real CLIs in
// terminal/coder/realcli_test.go); images/sandbox/Containerfile.agents is
// generated from them (a test checks).
func Builtin() Table {
	return Table{
		{
			Name: "claude", Title: "Claude Code", Vendor: Anthropic,
			KeyEnv: "ANTHROPIC_API_KEY", BaseURLEnv: "ANTHROPIC_BASE_URL",
			Command: "claude", Driver: "claude",
			Image: npmpin.Install{
				Version: "2.1.330",
				// The native executable; no node.
				Tarballs: []npmpin.Tarball{{
					Package: "@anthropic-ai/claude-code-linux-x64", Version: "2.1.330",
					Integrity: "sha512-9Gn+V7DtJ8M1nztP9CeDVl9g3RtrepI7rOFTyPRRnZe8D6zebIHKmC7OvBauucuAP0X0k85SDN/LPVZyjsGezQ==",
					From:      "package/", Dir: "claude",
				}},
				Link: npmpin.Dir + "/claude/claude",
			},
		},
		{
			Name: "codex", Title: "Codex", Vendor: OpenAI,
			// Codex ignores OPENAI_BASE_URL: its driver writes the base
			// URL into a model provider of its config.toml.
			KeyEnv: "OPENAI_API_KEY",
			// --no-daemon: without it Codex copies itself (404 MB) into
			// $CODEX_HOME/packages and starts an app-server daemon and a
			// pid-update loop that outlive it.
			Command: "codex --no-daemon", Driver: "codex",
			// 0.169 asks (--ask-for-approval on-request; "untrusted" is
			// gone) only within its own sandbox, whose bubblewrap cannot
			// create namespaces in the hardened container: every command
			// failed with "No permissions to create a new namespace", and
			// nothing asked.
			NoAsk: "Codex asks before its commands only together with its own sandbox (bubblewrap), which cannot run inside conch's hardened container",
			Image: npmpin.Install{
				Version: "0.169.0",
				// The native musl build with its package manifest,
				// resources and the ripgrep it expects on PATH
				// (codex-path), as its npm launcher lays them out.
				Tarballs: []npmpin.Tarball{{
					Package: "@openai/codex", Version: "0.169.0-linux-x64",
					Integrity: "sha512-o05NyAOCDygSPRo1yinzxvkRSdmsZyBD9E7mbpmjRanSfM8lypqWtQgEo4XfNkwhuCR2aFu8mlGOsQGFXVbVww==",
					From:      "package/vendor/x86_64-unknown-linux-musl/", Dir: "codex",
				}},
				Wrapper: "#!/bin/sh\n" +
					"PATH=\"" + npmpin.Dir + "/codex/codex-path:$PATH\" exec " + npmpin.Dir + "/codex/bin/codex \"$@\"\n",
				// Codex's system config layer (the user's config.toml
				// overrides it). Without it, every interactive start
				// launches the app-server daemon, which first copies the
				// whole CLI package (~350 MB) into
				// $CODEX_HOME/packages/app-server-daemon: per
				// conversation, in the workspace, and the daemon outlives
				// the CLI.
				Files: []npmpin.File{{Path: "/etc/codex/config.toml", Content: "# conch: the CLI is installed in the image; no daemon copy of it per workspace.\n" +
					"[features]\ndaemon_auto_start = false\n"}},
			},
		},
		{
			Name: "gemini", Title: "Gemini CLI", Vendor: Gemini,
			KeyEnv: "GEMINI_API_KEY", BaseURLEnv: "GOOGLE_GEMINI_BASE_URL",
			Command: "gemini", Driver: "gemini",
			Image: npmpin.Install{
				Version: "0.61.0",
				// A JavaScript bundle run by the pinned node.
				Tarballs: []npmpin.Tarball{{
					Package: "@google/gemini-cli", Version: "0.61.0",
					Integrity: "sha512-dbQ9A0qBtFJNi6XBkHvfZ6Azpn6PNgH/P8h2MZ67RLlX8hSAVjup39CRWqdRxZv7YXIuhrFaytr8y0jKnkoxnQ==",
					From:      "package/", Dir: "gemini",
				}, npmpin.Node()},
				Wrapper: npmpin.NodeWrapper(npmpin.Dir + "/gemini/bundle/gemini.js"),
			},
		},
	}
}
