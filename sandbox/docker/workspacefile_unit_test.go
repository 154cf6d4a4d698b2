package docker

import (
	"context"
	"testing"

	"conch"
)

// TestEngineOpsRefusesWorkspaceFiles: without the sandboxd a file cannot be
// read without following links, so sending one is refused, clearly, and
// nothing runs in the container.
func TestEngineOpsRefusesWorkspaceFiles(t *testing.T) {
	e := &engineOps{id: "box"}
	_, err := e.ReadWorkspaceFile(context.Background(), "/workspace/chart.png", 1<<20)
	if conch.KindOf(err) != conch.KindUnavailable || conch.UserMessage(err) == "" {
		t.Fatalf("got %v (kind %s), want an unavailable error naming the sandbox agent", err, conch.KindOf(err))
	}
}
