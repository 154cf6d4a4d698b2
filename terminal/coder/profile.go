package coder

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"conch/coders"
)

// Profile tells how to run one coding-agent CLI in a terminal and how to
// read its screen.
type Profile struct {
	// Name is a short identifier ("gemini", "claude", "codex").
	Name string
	// Command starts the CLI: a shell command line, run from the
	// workspace in conch's shell, so a crash brings the shell prompt back.
	Command string
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
	// Empty are screen texts shown only while the input box is empty (its
	// placeholder): typed text that never showed up is sent again only
	// while one is on the screen. Without them, a quiet screen decides.
	Empty []string
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
	// ReadyHook: Files install Setup.ReadyHook as the CLI's session-start
	// hook, and the driver waits for it before the first task.
	ReadyHook bool
	// Answer returns the CLI's final message of a turn from the JSON
	// payload its turn-end hook was given (the driver returns it as
	// TurnResult.Answer, exactly as the CLI gave it rather than as its
	// screen drew it); tail reads the end of a file in the sandbox, for a
	// payload that only names the CLI's transcript. nil when the hook
	// carries nothing of the kind; "" when this payload does not.
	Answer func(payload []byte, tail func(path string) ([]byte, error)) string
	// Own are the entries of the CLI's home (the workspace: HOME is it in
	// the sandbox) that the CLI writes as it works (settings, sessions,
	// logs), shell patterns; they are left out of the files a task
	// changed.
	Own []string

	// AutoArgs are appended to the command line in full-auto mode (the
	// default): the CLI runs commands and edits files without asking and
	// without a sandbox of its own; the container is the boundary.
	AutoArgs string
	// AskArgs are appended in ask mode (coder.approvals = ask): the CLI
	// keeps its permission prompts, which the driver routes to
	// respond_to_agent.
	AskArgs string
	// NoAsk, when set, says why the CLI cannot keep its permission prompts
	// in conch's sandbox: a driver in ask mode refuses to start it rather
	// than run it without them.
	NoAsk string
	// Env is added to the CLI's environment in both modes (KEY=value).
	Env []string
	// ResumeArgs, inserted after Command, make the CLI continue the most
	// recent session of the workspace (kept in its home) instead of a new
	// one: for a restart after a crash.
	ResumeArgs string
	// InterruptKeys are the tmux key names that stop a running turn,
	// sent in order (a short pause between them does no harm).
	InterruptKeys []string
	// ReadyPaste: the CLI takes input once it has switched bracketed paste
	// on. The driver must wait, after typing the command line, for the
	// first ESC[?2004h in the pane's output (tmux control mode's %output
	// carries it as \033[?2004h) that comes after the shell's own
	// ESC[?2004l (bash switches it off when it runs the command line) and
	// before the shell's exit marker; then it sends the first task (as a
	// bracketed paste when Paste is set). The screen's Ready markers alone
	// are no signal: they show while the CLI still initializes.
	ReadyPaste bool
	// EnterAgain: the CLI may drop the Enter after the first task even
	// with bracketed paste on (it still initializes; the pasted text stays
	// in its input line). The driver presses Enter again, once a second,
	// while the input line still holds the task.
	EnterAgain bool
	// Permit are the keys that answer the CLI's permission menu when a
	// person decided it (coder.approvals = person): allow once, allow for
	// the session, deny (see PermitKey for the fallbacks).
	Permit PermitKeys
}

// CommandLine is the shell command line that starts the CLI: Command, then
// ResumeArgs when resume is set, then AutoArgs (auto) or AskArgs.
func (p Profile) CommandLine(auto, resume bool) string {
	line := p.Command
	if resume && p.ResumeArgs != "" {
		line += " " + p.ResumeArgs
	}
	args := p.AskArgs
	if auto {
		args = p.AutoArgs
	}
	if args != "" {
		line += " " + args
	}
	return line
}

// Setup is what a Profile's Files need to know.
type Setup struct {
	// Home is the CLI's home directory in the sandbox.
	Home string
	// Workspace is the project directory.
	Workspace string
	// Hook is the shell command line the turn-end hook must run.
	Hook string
	// BaseURL is the CLI's API base URL (plain HTTP on the sandbox's
	// loopback, conch's credential-injecting forwarder). Claude Code and
	// Gemini CLI read it from BaseURLEnv too; Codex only from its config.
	BaseURL string
	// ReadyHook is the shell command line a session-start hook must run
	// (for profiles with ReadyHook).
	ReadyHook string
	// Ask is set when the CLI must keep its permission prompts
	// (coder.approvals = ask); otherwise it runs in its full-auto mode.
	Ask bool
	// APIKey is the key the CLI will use, when the profile must approve it
	// in its settings (Claude Code); may be empty.
	APIKey string
	// KeyEnv names the variable the CLI reads its key from, for settings
	// that name it (Codex's model provider); ProfileFor's Files set it from
	// the CLI's entry.
	KeyEnv string
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

// geminiDriver is the Gemini CLI (npm @google/gemini-cli; markers and settings
// checked against the real 0.61 TUI in terminal/coder/realcli_test.go). Its
// AfterAgent hook marks the end of a turn; folder trust and the auth dialog
// are settled in ~/.gemini/settings.json; GOOGLE_GEMINI_BASE_URL points it
// at its API (it then streams from {base}/v1beta/models/{model}:
// streamGenerateContent?alt=sse). GEMINI_CLI_NO_RELAUNCH keeps it from
// starting itself again as a child node sized by the host's memory rather
// than the sandbox's (a child that also outlived the tmux server).
func geminiDriver() Profile {
	return Profile{
		Own:           []string{".gemini"},
		Answer:        geminiAnswer,
		Env:           []string{"GEMINI_CLI_NO_RELAUNCH=true"},
		Paste:         true,
		AutoArgs:      "--yolo",
		ResumeArgs:    "--resume latest",
		InterruptKeys: []string{"Escape"},
		ReadyPaste:    true,
		EnterAgain:    true,
		Files: func(s Setup) ([]File, error) {
			f, err := jsonFile(path.Join(s.Home, ".gemini", "settings.json"), map[string]any{
				"security": map[string]any{
					"auth":        map[string]any{"selectedType": "gemini-api-key"},
					"folderTrust": map[string]any{"enabled": false},
				},
				// disableAutoUpdate and disableUpdateNag are the old
				// names; the CLI migrates them by rewriting the file.
				"general": map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
				// HOME is the workspace in the sandbox: no home-directory
				// warning; no true-colour warning either.
				"ui":      map[string]any{"hideBanner": true, "hideTips": true, "showHomeDirectoryWarning": false, "showCompatibilityWarnings": false},
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
		// and be typed instead, losing a "?". While it loads a resumed
		// session ("Resuming session...") its input is off: text sent then
		// is dropped.
		Busy:   []string{"esc to cancel", "Esc to cancel", "Resuming session..."},
		Asking: []string{"Allow execution", "Apply this change?", "Do you want to proceed?", "● 1. Yes, allow once", "● 1. Allow once"},
		// 1. Allow once, 2. Allow for this session, 3. No (esc).
		Permit: PermitKeys{Once: "1", Always: "2", Deny: "3"},
		Ready:  []string{"Type your message"},
		Empty:  []string{"Type your message"},
		Chrome: []string{"Type your message", "Executing Hook", "YOLO Ctrl+Y", "no sandbox", "context left", "? for shortcuts", "Shift+Tab to accept edits", "workspace (/directory)"},
	}
}

// claudeDriver is Claude Code (npm @anthropic-ai/claude-code). Its Stop hook marks
// the end of a turn; ~/.claude.json records onboarding, folder trust and
// the approved API key (its last 20 characters); ANTHROPIC_BASE_URL points
// it at its API.
func claudeDriver() Profile {
	return Profile{
		Own:      []string{".claude", ".claude.json*"},
		Answer:   answerField("last_assistant_message"),
		Paste:    true,
		AutoArgs: "--dangerously-skip-permissions",
		// Without a mode it starts in "auto mode" (a classifier approves
		// what it deems safe), which asks for little; ask means asking.
		AskArgs: "--permission-mode default",
		Env: []string{"IS_SANDBOX=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1"},
		ResumeArgs:    "--continue",
		InterruptKeys: []string{"Escape"},
		ReadyPaste:    true,
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
				"autoUpdates":                       false,
				"skipDangerousModePermissionPrompt": true,
				"env":                               map[string]string{"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
			})
			return []File{state, settings}, err
		},
		// 2.1.330: the input line "❯ " sits between two rules; the footer
		// says "⏵⏵ bypass permissions on (shift+tab to cycle)" in auto
		// mode ("? for shortcuts" in ask mode) and adds "· esc to
		// interrupt" while it works ("✻ Sublimating… (5s · ↓ 7 tokens)").
		Busy:   []string{"esc to interrupt"},
		Asking: []string{"Do you want to proceed?", "Do you want to make this edit", "❯ 1. Yes"},
		// 1. Yes, 2. Yes, and don't ask again for this command here, 3. No.
		Permit: PermitKeys{Once: "1", Always: "2", Deny: "3"},
		Ready:  []string{"bypass permissions on", "? for shortcuts"},
		Chrome: []string{"? for shortcuts", "auto-accept edits", "bypass permissions", "← for agents", "/effort"},
	}
}

// CodexProvider is the id of the model provider the Codex profile
// configures (config.toml [model_providers.conch]).
const CodexProvider = "conch"

// codexDriver is the Codex CLI (npm @openai/codex). Its notify program marks the
// end of a turn; ~/.codex/config.toml trusts the workspace, skips the
// update check and the notices, and points it at Setup.BaseURL through a
// model provider of its own: Codex ignores OPENAI_BASE_URL, and the
// built-in provider wants a ChatGPT sign-in.
func codexDriver() Profile {
	return Profile{
		Own:           []string{".codex"},
		Answer:        answerField("last-assistant-message"),
		Paste:         true,
		AutoArgs:      "--dangerously-bypass-approvals-and-sandbox",
		ResumeArgs:    "resume --last",
		InterruptKeys: []string{"Escape"},
		ReadyPaste:    true,
		Files: func(s Setup) ([]File, error) {
			if s.BaseURL == "" {
				return nil, fmt.Errorf("codex profile: no base URL")
			}
			// Codex also notifies for its title-generation thread (a
			// second notify per turn, possibly first): only the main
			// thread's turn counts.
			words := []string{"sh", "-c", `case "$1" in *'single-line task title'*) exit 0 ;; esac; ` + s.Hook + ` "$@"`, "conch-notify"}
			var b strings.Builder
			// Root keys must come before tables.
			fmt.Fprintf(&b, "notify = [%s]\n", tomlStrings(words))
			fmt.Fprintf(&b, "model_provider = %s\n", tomlString(CodexProvider))
			b.WriteString("check_for_update_on_startup = false\n")
			fmt.Fprintf(&b, "\n[model_providers.%s]\nname = %s\nbase_url = %s\nenv_key = %s\nwire_api = \"responses\"\nrequires_openai_auth = false\nsupports_websockets = false\n",
				CodexProvider, tomlString(CodexProvider), tomlString(s.BaseURL), tomlString(s.KeyEnv))
			fmt.Fprintf(&b, "\n[projects.%s]\ntrust_level = \"trusted\"\n", tomlString(s.Workspace))
			b.WriteString("\n[notice]\nhide_full_access_warning = true\nhide_world_writable_warning = true\nhide_rate_limit_model_nudge = true\n")
			b.WriteString("\n[analytics]\nenabled = false\n\n[feedback]\nenabled = false\n")
			b.WriteString("\n[tui]\nshow_tooltips = false\n")
			// Plugins off: at start it would sync a curated plugin
			// catalogue from GitHub and ChatGPT (refused and audited).
			b.WriteString("\n[features]\nplugins = false\nremote_plugin = false\nplugin_discovery_prefetch = false\nrecommended_plugins = false\n")
			return []File{{Path: path.Join(s.Home, ".codex", "config.toml"), Data: []byte(b.String()), Mode: 0o600}}, nil
		},
		// 0.169: "• Working (5s • esc to interrupt)" while it works; the
		// input line "› Ask Codex to do anything" and the footer "← for
		// agents · ? for shortcuts" stay on screen meanwhile.
		Busy:   []string{"esc to interrupt", "Esc to interrupt"},
		Asking: []string{"Allow command?", "Would you like to run the following command?", "Yes, proceed", "› 1. Yes"},
		Ready:  []string{"? for shortcuts", "Ask Codex to do anything"},
		Empty:  []string{"Ask Codex to do anything"},
		Chrome: []string{"? for shortcuts", "← for agents", "Ask Codex to do anything", "context left"},
		Settle: 5 * time.Second,
	}
}

// PermitKeys answer a permission menu.
type PermitKeys struct{ Once, Always, Deny string }

// PermitKey is the text that answers the CLI's permission menu with a
// person's choice: once, for the session, or no.
func (p Profile) PermitKey(allow, always bool) string {
	k := p.Permit
	switch {
	case allow && always && k.Always != "":
		return k.Always
	case allow && k.Once != "":
		return k.Once
	case allow:
		return "1"
	case k.Deny != "":
		return k.Deny
	}
	return "3"
}

// FakeCLI is the profile of internal/testenv/fakecli, the test double,
// installed at bin. Its start-up takes startup (keys sent earlier are
// lost), like the real CLIs'.
func FakeCLI(bin string, startup time.Duration) Profile {
	return Profile{
		Name:       "fakecli",
		Own:        []string{".fakecli"},
		Answer:     answerField("last_assistant_message"),
		Command:    shellQuote(bin),
		AutoArgs:   "--yolo",
		ResumeArgs: "--continue",
		BaseURLEnv: "FAKECLI_BASE_URL",
		ReadyHook:  true,
		ReadyPaste: true,
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
		Permit: PermitKeys{Once: "1", Always: "1", Deny: "2"},
		Ready:  []string{"│ > "},
		Empty:  []string{"(type a task)"},
		Chrome: []string{"? for shortcuts", "(type a task)"},
		Settle: 2 * time.Second,
	}
}

// drivers are the profiles' CLI-specific parts (settings files, screen
// markers, keys, arguments), by coders.CLI.Driver. The facts other
// packages share (name, command, key and base-URL variables, what it
// cannot do) come from the CLI's entry in package coders (ProfileFor).
var drivers = map[string]func() Profile{"claude": claudeDriver, "codex": codexDriver, "gemini": geminiDriver}

// ProfileFor returns the profile of a coding CLI: its driver (cli.Driver)
// completed with the entry's name, command, variables and NoAsk.
func ProfileFor(cli coders.CLI) (Profile, error) {
	d, ok := drivers[cli.Driver]
	if !ok {
		return Profile{}, fmt.Errorf("coding CLI %s: no driver profile %q (known: %s)", cli.Name, cli.Driver, strings.Join(slices.Sorted(maps.Keys(drivers)), ", "))
	}
	p := d()
	p.Name, p.Command = cli.Name, cli.Command
	p.APIKeyEnv, p.BaseURLEnv = cli.KeyEnv, cli.BaseURLEnv
	p.NoAsk = cli.NoAsk
	if files := p.Files; files != nil {
		p.Files = func(s Setup) ([]File, error) {
			s.KeyEnv = cli.KeyEnv
			return files(s)
		}
	}
	return p, nil
}

// builtin is the profile of a built-in CLI (coders.Builtin).
func builtin(name string) Profile {
	cli, ok := coders.Builtin().Lookup(name)
	if !ok {
		panic("coder: no built-in coding CLI " + name)
	}
	p, err := ProfileFor(cli)
	if err != nil {
		panic(err)
	}
	return p
}

// Gemini is Gemini CLI's profile (geminiDriver with its coders entry).
func Gemini() Profile { return builtin("gemini") }

// Claude is Claude Code's profile (claudeDriver with its coders entry).
func Claude() Profile { return builtin("claude") }

// Codex is the Codex CLI's profile (codexDriver with its coders entry).
func Codex() Profile { return builtin("codex") }

// Profiles returns the profiles of the built-in CLIs (coders.Builtin) by
// name.
func Profiles() map[string]Profile {
	out := map[string]Profile{}
	for _, cli := range coders.Builtin() {
		out[cli.Name] = builtin(cli.Name)
	}
	return out
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
