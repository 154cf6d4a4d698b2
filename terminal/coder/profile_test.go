package coder

import (
	"encoding/json"
	"strings"
	"testing"
)

// The settings files the profiles write are well-formed, run the hook and
// settle the first-run screens.
func TestProfileFiles(t *testing.T) {
	s := Setup{Home: "/home/u", Workspace: "/workspace", Hook: "sh '/tmp/conch/turn-end.sh' 'p' 00ff", APIKey: "sk-ant-0123456789abcdefghijKLMNOPQRST"}
	for _, tc := range []struct {
		p     Profile
		files map[string][]string // path → texts it must contain
	}{
		{Gemini(), map[string][]string{"/home/u/.gemini/settings.json": {`"AfterAgent"`, `"folderTrust"`, `"selectedType": "gemini-api-key"`, `turn-end.sh`}}},
		{Claude(), map[string][]string{
			"/home/u/.claude.json":          {`"hasCompletedOnboarding": true`, `"hasTrustDialogAccepted": true`, `"/workspace"`, `"abcdefghijKLMNOPQRST"`},
			"/home/u/.claude/settings.json": {`"Stop"`, `turn-end.sh`},
		}},
		{Codex(), map[string][]string{"/home/u/.codex/config.toml": {`notify = ["sh", "-c", "sh '/tmp/conch/turn-end.sh' 'p' 00ff \"$@\"", "conch-notify"]`, `[projects."/workspace"]`, `trust_level = "trusted"`}}},
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
