package coder

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

var testSetup = Setup{Home: "/home/u", Workspace: "/workspace", Hook: "sh '/tmp/conch/turn-end.sh' 'p' 00ff", BaseURL: "http://127.0.0.1:4000", APIKey: "conch-placeholder-key-0123456789"}

// The settings files the profiles write are well-formed, run the hook and
// settle the first-run screens.
func TestProfileFiles(t *testing.T) {
	s := testSetup
	for _, tc := range []struct {
		p     Profile
		files map[string][]string // path → texts it must contain
	}{
		{Gemini(), map[string][]string{"/home/u/.gemini/settings.json": {`"AfterAgent"`, `"folderTrust"`, `"selectedType": "gemini-api-key"`, `turn-end.sh`, `"showHomeDirectoryWarning": false`}}},
		{Claude(), map[string][]string{
			"/home/u/.claude.json":          {`"hasCompletedOnboarding": true`, `"hasTrustDialogAccepted": true`, `"/workspace"`, `"older-key-0123456789"`},
			"/home/u/.claude/settings.json": {`"Stop"`, `turn-end.sh`, `"skipDangerousModePermissionPrompt": true`},
		}},
		{Codex(), map[string][]string{"/home/u/.codex/config.toml": {`sh '/tmp/conch/turn-end.sh' 'p' 00ff \"$@\"", "conch-notify"]`, `[projects."/workspace"]`, `trust_level = "trusted"`}}},
		{FakeCLI("/bin/fakecli", 0), map[string][]string{"/home/u/.fakecli/settings.json": {`"onboarded": true`, `turn-end.sh`}}},
	} {
		t.Run(tc.p.Name, func(t *testing.T) {
			files, err := tc.p.Files(s)
			if err != nil {
				t.Fatalf("Files: %v", err)
			}
			if len(files) != len(tc.files) {
				t.Fatalf("got %d files, want %d", len(files), len(tc.files))
			}
			for _, f := range files {
				wants, ok := tc.files[f.Path]
				if !ok {
					t.Fatalf("unexpected file %s", f.Path)
				}
				if strings.HasSuffix(f.Path, ".json") && !json.Valid(f.Data) {
					t.Errorf("%s is not valid JSON:\n%s", f.Path, f.Data)
				}
				for _, w := range wants {
					if !strings.Contains(string(f.Data), w) {
						t.Errorf("%s: missing %s in\n%s", f.Path, w, f.Data)
					}
				}
			}
			if len(tc.p.Busy) == 0 || len(tc.p.Ready) == 0 || len(tc.p.Asking) == 0 || tc.p.Command == "" {
				t.Errorf("profile %s lacks screen markers or a command", tc.p.Name)
			}
		})
	}
}

// Codex's config.toml parses and names a model provider at the base URL
// that needs no ChatGPT sign-in and no websockets.
func TestCodexConfig(t *testing.T) {
	files, err := Codex().Files(testSetup)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Notify                  []string `toml:"notify"`
		ModelProvider           string   `toml:"model_provider"`
		CheckForUpdateOnStartup *bool    `toml:"check_for_update_on_startup"`
		ModelProviders          map[string]struct {
			BaseURL            string `toml:"base_url"`
			EnvKey             string `toml:"env_key"`
			WireAPI            string `toml:"wire_api"`
			RequiresOpenAIAuth *bool  `toml:"requires_openai_auth"`
			SupportsWebsockets *bool  `toml:"supports_websockets"`
		} `toml:"model_providers"`
		Projects map[string]struct {
			TrustLevel string `toml:"trust_level"`
		} `toml:"projects"`
		Notice map[string]bool `toml:"notice"`
	}
	md, err := toml.Decode(string(files[0].Data), &cfg)
	if err != nil {
		t.Fatalf("config.toml does not parse: %v\n%s", err, files[0].Data)
	}
	if un := md.Undecoded(); len(un) > 0 {
		t.Logf("keys not checked: %v", un)
	}
	p, ok := cfg.ModelProviders[cfg.ModelProvider]
	if cfg.ModelProvider != CodexProvider || !ok {
		t.Fatalf("model_provider %q, providers %v", cfg.ModelProvider, cfg.ModelProviders)
	}
	if p.BaseURL != testSetup.BaseURL || p.EnvKey != Codex().APIKeyEnv || p.WireAPI != "responses" ||
		p.RequiresOpenAIAuth == nil || *p.RequiresOpenAIAuth || p.SupportsWebsockets == nil || *p.SupportsWebsockets {
		t.Errorf("provider %+v", p)
	}
	if cfg.CheckForUpdateOnStartup == nil || *cfg.CheckForUpdateOnStartup || !cfg.Notice["hide_full_access_warning"] {
		t.Errorf("update check or notices: %+v %v", cfg.CheckForUpdateOnStartup, cfg.Notice)
	}
	if cfg.Projects["/workspace"].TrustLevel != "trusted" || len(cfg.Notify) != 4 || cfg.Notify[0] != "sh" {
		t.Errorf("projects %v notify %q", cfg.Projects, cfg.Notify)
	}
	if _, err := Codex().Files(Setup{Home: "/h", Workspace: "/w", Hook: "true"}); err == nil {
		t.Error("a Codex setup without a base URL was accepted")
	}
}

// TestCodexNotifyFilter: Codex notifies for its title-generation thread
// too; only the main thread's turn runs the hook.
func TestCodexNotifyFilter(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	setup := testSetup
	setup.Hook = "echo \"$1\" >> " + mark
	files, err := Codex().Files(setup)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Notify []string `toml:"notify"`
	}
	if _, err := toml.Decode(string(files[0].Data), &cfg); err != nil {
		t.Fatal(err)
	}
	title := `{"type":"agent-turn-complete","thread-id":"t2","input-messages":["Generate a concise, single-line task title for this request: fix the bug"],"last-assistant-message":"Fix the bug"}`
	main := `{"type":"agent-turn-complete","thread-id":"t1","input-messages":["fix the bug"],"last-assistant-message":"Fixed."}`
	for _, payload := range []string{title, main} {
		if out, err := exec.Command(cfg.Notify[0], append(cfg.Notify[1:], payload)...).CombinedOutput(); err != nil {
			t.Fatalf("notify: %v %s", err, out)
		}
	}
	got, err := os.ReadFile(mark)
	if err != nil || strings.Count(string(got), "\n") != 1 || !strings.Contains(string(got), `"thread-id":"t1"`) {
		t.Fatalf("hook runs: got %q (%v), want one, for the main thread", got, err)
	}
}

// The command lines are the ones checked against the real CLIs.
func TestCommandLines(t *testing.T) {
	for _, tc := range []struct {
		p                 Profile
		auto, resume, ask string
	}{
		{Claude(), "claude --dangerously-skip-permissions", "claude --continue --dangerously-skip-permissions", "claude --permission-mode default"},
		{Codex(), "codex --no-daemon --dangerously-bypass-approvals-and-sandbox", "codex --no-daemon resume --last --dangerously-bypass-approvals-and-sandbox", "codex --no-daemon"},
		{Gemini(), "gemini --yolo", "gemini --resume latest --yolo", "gemini"},
	} {
		if got := tc.p.CommandLine(true, false); got != tc.auto {
			t.Errorf("%s auto: %q, want %q", tc.p.Name, got, tc.auto)
		}
		if got := tc.p.CommandLine(true, true); got != tc.resume {
			t.Errorf("%s resume: %q, want %q", tc.p.Name, got, tc.resume)
		}
		if got := tc.p.CommandLine(false, false); got != tc.ask {
			t.Errorf("%s ask: %q, want %q", tc.p.Name, got, tc.ask)
		}
		if len(tc.p.InterruptKeys) == 0 || !tc.p.ReadyPaste || !tc.p.Paste {
			t.Errorf("%s: interrupt keys %v, ready paste %v, paste %v", tc.p.Name, tc.p.InterruptKeys, tc.p.ReadyPaste, tc.p.Paste)
		}
	}
	if !strings.Contains(strings.Join(Claude().Env, " "), "IS_SANDBOX=1") {
		t.Error("Claude Code's --dangerously-skip-permissions needs IS_SANDBOX=1")
	}
}
