package config

import (
	"strings"
	"testing"
)

// TestToolsApprove: tools.approve takes patterns from the environment
// (comma-separated); an empty pattern or "*" is refused with the key.
func TestToolsApprove(t *testing.T) {
	dir := t.TempDir()
	base := []string{"XDG_CONFIG_HOME=" + dir, "HOME=" + dir, "CONCH_MODEL_PROVIDER=openai", "CONCH_MODEL=gpt-test", "CONCH_MODEL_API_KEY=k"}
	c, err := Load("", append(base, "CONCH_TOOLS_APPROVE=git push *,rm -rf *"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Tools.Approve) != 2 || c.Tools.Approve[1] != "rm -rf *" || c.Tools.ApprovalTimeout.D().Minutes() != 10 {
		t.Fatalf("tools: %+v", c.Tools)
	}
	for _, bad := range []string{"*", "git push *, "} {
		c, err := Load("", append(base, "CONCH_TOOLS_APPROVE="+bad))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "tools.approve") {
			t.Errorf("%q: %v, want a tools.approve error", bad, err)
		}
	}
	c, _ = Load("", append(base, "CONCH_TOOLS_APPROVAL_TIMEOUT=0s"))
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "tools.approval_timeout") {
		t.Errorf("a zero timeout: %v", err)
	}
}
