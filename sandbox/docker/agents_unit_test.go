package docker

import (
	"slices"
	"strings"
	"testing"

	sandboximage "conch/images/sandbox"
)

func TestManagedRef(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		ref    string
		want   bool
	}{
		{"built as the configured ref", map[string]string{sandboximage.RefLabel: "conch-sandbox:latest"}, "conch-sandbox:latest", true},
		{"built FROM it under another name", map[string]string{sandboximage.RefLabel: "conch-sandbox:latest"}, "mine:1", false},
		{"older conch image, default ref", map[string]string{}, DefaultImage, true},
		{"older conch image, other ref", map[string]string{}, "mine:1", false},
		{"a derived image is never the base", map[string]string{sandboximage.AgentsLabel: "claude"}, DefaultImage, false},
	}
	for _, tt := range tests {
		tt.labels[sandboximage.HashLabel] = "0123"
		if got := managedRef(tt.labels, tt.ref); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCommitChanges(t *testing.T) {
	as, err := sandboximage.LookupAgents([]string{"codex", "claude"})
	if err != nil {
		t.Fatal(err)
	}
	cs, labels := commitChanges("1000:1000", "/workspace", []string{"sleep", "infinity"},
		map[string]string{sandboximage.HashLabel: "h", sandboximage.RefLabel: "conch-sandbox:latest"}, "conch-sandbox:latest", as, "abc", "conch-sandbox-claude-codex:abc")
	for _, want := range []string{"USER 1000:1000", "WORKDIR /workspace", `CMD ["sleep", "infinity"]`,
		`LABEL conch.agents="claude,codex"`, `LABEL conch.agent.claude.version="2.1.330"`, `LABEL conch.agents-hash="abc"`,
		`LABEL conch.image-ref="conch-sandbox-claude-codex:abc"`} {
		if !slices.Contains(cs, want) {
			t.Errorf("changes %q lack %q", cs, want)
		}
	}
	if labels[sandboximage.HashLabel] != "h" || labels[sandboximage.RefLabel] != "conch-sandbox-claude-codex:abc" || labels[sandboximage.AgentsLabel] != "claude,codex" || labels[labelAgentsBase] != "conch-sandbox:latest" {
		t.Errorf("labels %v: want the base's hash, our ref and agents", labels)
	}
}

func TestLookupAgentsUnknown(t *testing.T) {
	if _, err := lookupAgents([]string{"claude", "vim"}); err == nil || !strings.Contains(err.Error(), `"vim"`) {
		t.Errorf("unknown agent: got %v", err)
	}
}

func TestWantImageHashWithAgents(t *testing.T) {
	as, _ := sandboximage.LookupAgents([]string{"gemini"})
	base := imageState{ID: "sha256:1", Ref: DefaultImage, Hash: sandboximage.Hash(), Managed: true}
	hash, ref := derivedRef(base, as)
	if hash != sandboximage.AgentsHash(sandboximage.Hash(), as) || ref != "conch-sandbox-gemini:"+hash {
		t.Errorf("derivedRef: %s %s", hash, ref)
	}
	if !hasAgents(map[string]string{"gemini": "0.61.0"}, as) || hasAgents(map[string]string{"gemini": "0.60.0"}, as) || hasAgents(nil, as) {
		t.Errorf("hasAgents: a base with the pinned version counts, another version or none does not")
	}
}
