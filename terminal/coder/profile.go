package coder

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"
)

// Profile tells how to run one coding-agent CLI in a terminal and how to
// read its screen.
type Profile struct {
	// Name is a short identifier ("gemini", "claude", "codex").
	Name string
	// Command starts the CLI: a shell command line, run from the
	// workspace in conch's shell, so a crash brings the shell prompt back.
	Command string
	// AutoArgs are added to Command unless approvals are asked for
	// (Options.Ask): the CLI's own full-auto mode, since the container is
	// the boundary.
	AutoArgs string
	// ResumeArgs are added to Command to continue the CLI's last session
	// when it is started again after a crash; empty: it cannot resume.
	ResumeArgs string
	// Env is the CLI's own environment (KEY=value) besides its key and
	// base URL.
	Env []string
	// BaseURLEnv names the environment variable that points the CLI at
	// its API (conch's credential-injecting route); empty when the base
	// URL goes into its settings files instead (Setup.BaseURL).
	BaseURLEnv string
	// APIKeyEnv names the environment variable the CLI reads its key from.
	APIKeyEnv string
	// Files returns the settings files that skip the CLI's first-run
	// screens (onboarding, folder trust, API-key confirmation) and install
	// its turn-end hook, which must run hook (a shell command line).
	Files func(s Setup) ([]File, error)
	// Busy are screen texts shown only while the CLI works.
	Busy []string
	// Asking are screen texts of a permission menu or question.
	Asking []string
	// Ready are screen texts of the idle input box.
	Ready []string
	// Chrome are texts of lines that are decoration (footer, hints); they
	// are left out of what the model reads.
	Chrome []string
	// Paste sends text as one bracketed paste instead of typed keys: for
	// CLIs that take some typed characters as shortcuts (Gemini CLI opens
	// its shortcuts panel on "?" and drops the character).
	Paste bool
	// EnterDelay is how long to wait between typing text and pressing
	// Enter (the CLIs swallow an Enter that comes too soon); 0 means 300 ms.
	EnterDelay time.Duration
	// Settle is how long the screen must be quiet, idle and without busy
	// markers for a turn to count as ended when no hook fired; 0 means 3 s.
	Settle time.Duration
	// Hosts are the API hosts the CLI may reach through the egress proxy.
	Hosts []string
	// ReadyHook: Files install Setup.ReadyHook as the CLI's session-start
	// hook, and the driver waits for it before the first task.
	ReadyHook bool
	// PasteReady: the CLI switches bracketed paste on once its input takes
	// text, and the driver waits for that before the first task.
	PasteReady bool
	// InterruptKeys stop a running turn (tmux key names, sent in order);
	// nil means Escape.
	InterruptKeys []string
}

// Setup is what a Profile's Files need to know.
type Setup struct {
	// Home is the CLI's home directory in the sandbox.
	Home string
	// Workspace is the project directory.
	Workspace string
	// Hook is the shell command line the turn-end hook must run.
	Hook string
	// ReadyHook is the shell command line a session-start hook must run
	// (for profiles with ReadyHook).
	ReadyHook string
	// BaseURL is the CLI's API base URL (conch's route to it); empty means
	// the CLI's default.
	BaseURL string
	// Ask is set when the CLI must keep its permission prompts
	// (coder.approvals = ask); otherwise it runs in its full-auto mode.
	Ask bool
	// APIKey is the key the CLI will use, when the profile must approve it
	// in its settings (Claude Code); may be empty.
	APIKey string
}

// File is one file to write into the sandbox before the CLI starts.
type File struct {
	Path string
	Data []byte
	Mode fs.FileMode
}

func (p Profile) enterDelay() time.Duration {
	if p.EnterDelay > 0 {
		return p.EnterDelay
	}
	return 300 * time.Millisecond
}

func (p Profile) interruptKeys() []string {
	if len(p.InterruptKeys) > 0 {
		return p.InterruptKeys
	}
	return []string{"Escape"}
}

func (p Profile) settle() time.Duration {
	if p.Settle > 0 {
		return p.Settle
	}
	return 3 * time.Second
}

func jsonFile(p string, v any) (File, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return File{}, fmt.Errorf("profile file %s: %w", p, err)
	}
	return File{Path: p, Data: append(b, '\n'), Mode: 0o600}, nil
}

// Gemini is the Gemini CLI (npm @google/gemini-cli; markers and settings
// checked against the real 0.61 TUI in terminal/coder/realcli_test.go). Its
// AfterAgent hook marks the end of a turn; folder trust and the auth dialog
// are settled in ~/.gemini/settings.json; GOOGLE_GEMINI_BASE_URL points it
// at its API (it then streams from {base}/v1beta/models/{model}:
// streamGenerateContent?alt=sse) and it honours HTTPS_PROXY for it (a
// global undici proxy agent), so the egress proxy carries its traffic.
func Gemini() Profile {
	return Profile{
		Name:       "gemini",
		Command:    "gemini",
		Paste:      true,
		BaseURLEnv: "GOOGLE_GEMINI_BASE_URL",
		APIKeyEnv:  "GEMINI_API_KEY",
		Files: func(s Setup) ([]File, error) {
			f, err := jsonFile(path.Join(s.Home, ".gemini", "settings.json"), map[string]any{
				"security": map[string]any{
					"auth":        map[string]any{"selectedType": "gemini-api-key"},
					"folderTrust": map[string]any{"enabled": false},
				},
				// disableAutoUpdate and disableUpdateNag are the old
				// names; the CLI migrates them by rewriting the file.
				"general": map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
				"ui":      map[string]any{"hideBanner": true, "hideTips": true},
				"privacy": map[string]any{"usageStatisticsEnabled": false},
				// hooksConfig.enabled switches hooks on (tools.enableHooks
				// and hooks.enabled of early releases are gone). Hooks
				// from settings run only in a trusted folder, which every
				// folder is with folder trust off.
				"hooksConfig": map[string]any{"enabled": true},
				"hooks": map[string]any{
					"AfterAgent": []any{map[string]any{
						"matcher": "*",
						"hooks":   []any{map[string]any{"name": "conch-turn-end", "type": "command", "command": s.Hook}},
					}},
				},
			})
			return []File{f}, err
		},
		// "Thinking... (esc to cancel, 3s)" while it works; the input
		// box ("Type your message") stays on screen meanwhile, and is
		// gone while a permission box ("Allow execution of [Shell]?",
		// "● 1. Allow once") waits. Text pasted while it still initializes
		// ("Initializing... Prompts will be queued.", a line that stays in
		// the transcript) may arrive before it switches on bracketed paste
		// and be typed instead, losing a "?".
		Busy:   []string{"esc to cancel", "Esc to cancel"},
		Asking: []string{"Allow execution", "Apply this change?", "Do you want to proceed?", "● 1. Yes, allow once", "● 1. Allow once"},
		Ready:  []string{"Type your message"},
		Chrome: []string{"Type your message", "no sandbox", "context left", "? for shortcuts", "Shift+Tab to accept edits", "workspace (/directory)"},
		Hosts:  []string{"generativelanguage.googleapis.com"},
	}
}

// Claude is Claude Code (npm @anthropic-ai/claude-code). Its Stop hook marks
// the end of a turn; ~/.claude.json records onboarding, folder trust and
// the approved API key (its last 20 characters); ANTHROPIC_BASE_URL points
// it at its API.
func Claude() Profile {
	return Profile{
		Name:       "claude",
		Command:    "claude",
		BaseURLEnv: "ANTHROPIC_BASE_URL",
		APIKeyEnv:  "ANTHROPIC_API_KEY",
		Files: func(s Setup) ([]File, error) {
			approved := []string{}
			if k := s.APIKey; k != "" {
				approved = append(approved, k[max(0, len(k)-20):])
			}
			state, err := jsonFile(path.Join(s.Home, ".claude.json"), map[string]any{
				"hasCompletedOnboarding":        true,
				"theme":                         "dark",
				"bypassPermissionsModeAccepted": true,
				"customApiKeyResponses":         map[string]any{"approved": approved, "rejected": []string{}},
				"projects": map[string]any{s.Workspace: map[string]any{
					"hasTrustDialogAccepted":        true,
					"hasTrustDialogHooksAccepted":   true,
					"hasCompletedProjectOnboarding": true,
					"projectOnboardingSeenCount":    1,
				}},
			})
			if err != nil {
				return nil, err
			}
			settings, err := jsonFile(path.Join(s.Home, ".claude", "settings.json"), map[string]any{
				"hooks": map[string]any{
					"Stop": []any{map[string]any{
						"hooks": []any{map[string]any{"type": "command", "command": s.Hook}},
					}},
				},
				"autoUpdates": false,
				"env":         map[string]string{"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
			})
			return []File{state, settings}, err
		},
		Busy:   []string{"esc to interrupt"},
		Asking: []string{"Do you want to proceed?", "Do you want to make this edit", "❯ 1. Yes"},
		Ready:  []string{"? for shortcuts", "│ >", "│ > "},
		Chrome: []string{"? for shortcuts", "auto-accept edits", "bypass permissions"},
		Hosts:  []string{"api.anthropic.com"},
	}
}

// Codex is the Codex CLI (npm @openai/codex). Its notify program marks the
// end of a turn; ~/.codex/config.toml trusts the workspace and skips the
// update check; OPENAI_BASE_URL points it at its API. Its busy marker
// vanishes while it streams, so its settle time is longer.
func Codex() Profile {
	return Profile{
		Name:       "codex",
		Command:    "codex",
		BaseURLEnv: "OPENAI_BASE_URL",
		APIKeyEnv:  "OPENAI_API_KEY",
		Files: func(s Setup) ([]File, error) {
			words := []string{"sh", "-c", s.Hook + ` "$@"`, "conch-notify"}
			var b strings.Builder
			// Root keys must come before tables.
			fmt.Fprintf(&b, "notify = [%s]\n", tomlStrings(words))
			b.WriteString("check_for_update_on_startup = false\n")
			b.WriteString("approval_policy = \"on-request\"\n")
			b.WriteString("sandbox_mode = \"workspace-write\"\n")
			fmt.Fprintf(&b, "\n[projects.%s]\ntrust_level = \"trusted\"\n", tomlString(s.Workspace))
			b.WriteString("\n[notice]\nhide_full_access_warning = true\n")
			return []File{{Path: path.Join(s.Home, ".codex", "config.toml"), Data: []byte(b.String()), Mode: 0o600}}, nil
		},
		Busy:   []string{"Esc to interrupt", "esc to interrupt"},
		Asking: []string{"Allow command?", "Would you like to run the following command?", "Yes, proceed", "› 1. Yes"},
		Ready:  []string{"⏎ send", "? for shortcuts", "context left"},
		Chrome: []string{"⏎ send", "? for shortcuts", "context left"},
		Settle: 5 * time.Second,
		Hosts:  []string{"api.openai.com"},
	}
}

// FakeCLI is the profile of internal/testenv/fakecli, the test double,
// installed at bin. Its start-up takes startup (keys sent earlier are
// lost), like the real CLIs'.
func FakeCLI(bin string, startup time.Duration) Profile {
	return Profile{
		Name:       "fakecli",
		Command:    shellQuote(bin),
		AutoArgs:   "--yolo",
		ResumeArgs: "--continue",
		BaseURLEnv: "FAKECLI_BASE_URL",
		ReadyHook:  true,
		PasteReady: true,
		Files: func(s Setup) ([]File, error) {
			f, err := jsonFile(path.Join(s.Home, ".fakecli", "settings.json"), map[string]any{
				"onboarded":  true,
				"startup_ms": startup.Milliseconds(),
				"hooks":      map[string]any{"stop": s.Hook, "start": s.ReadyHook},
			})
			return []File{f}, err
		},
		Busy:   []string{"esc to interrupt"},
		Asking: []string{"❯ 1. Yes"},
		Ready:  []string{"│ > "},
		Chrome: []string{"? for shortcuts"},
		Settle: 2 * time.Second,
	}
}

// Profiles returns the built-in profiles by name.
func Profiles() map[string]Profile {
	return map[string]Profile{"gemini": Gemini(), "claude": Claude(), "codex": Codex()}
}

func tomlString(s string) string {
	b, _ := json.Marshal(s) // a JSON string is a valid TOML basic string
	return string(b)
}

func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return strings.Join(q, ", ")
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
