package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/agent"
	"conch/sqlite"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// transcriptStoreFixture writes two recorded turns into a store in dir: a
// tool call with its result, then a turn that compacts the context and
// retries a model error. Times are fixed; several share a millisecond.
func transcriptStoreFixture(t *testing.T, dir string) conch.ConversationKey {
	t.Helper()
	ctx := context.Background()
	base := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	now := base
	db, err := sqlite.Open(ctx, filepath.Join(dir, storeFile), sqlite.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "alice"}
	at := func(ms int) time.Time { now = base.Add(time.Duration(ms) * time.Millisecond); return now }
	step := func(id conch.TurnID, ms int, kind conch.StepKind, detail any) {
		b, err := json.Marshal(detail)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.RecordStep(ctx, conch.Step{Turn: id, Kind: kind, Detail: b, At: at(ms)}); err != nil {
			t.Fatal(err)
		}
	}
	msg := func(id conch.TurnID, ms int, m conch.Message) {
		at(ms)
		if err := db.AppendMessage(ctx, id, m); err != nil {
			t.Fatal(err)
		}
	}
	inbound := func(ms int, text, ext string) conch.TurnID {
		at(ms)
		turn, _, err := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: text, ExternalID: ext})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.StartTurn(ctx, turn.ID); err != nil {
			t.Fatal(err)
		}
		return turn.ID
	}
	zero := 0

	t1 := inbound(0, "What is in my workspace?\nList it, please.", "m1")
	step(t1, 900, conch.StepModelCall, agent.ModelCallDetail{Model: "gpt-test", DurationMS: 900, InputTokens: 812, OutputTokens: 21, StopReason: conch.StopToolUse, ToolCalls: 1})
	msg(t1, 900, conch.Message{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"cmd":"ls /workspace"}`)}}})
	step(t1, 900, conch.StepToolCall, agent.ToolCallDetail{ID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"cmd":"ls /workspace"}`)})
	step(t1, 1150, conch.StepToolResult, agent.ToolResultDetail{ID: "call_1", Name: "bash", DurationMS: 250, Bytes: 25, ExitCode: &zero})
	msg(t1, 1150, conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "call_1", Name: "bash", Content: "notes.md\nplan ```v2```.txt\n"}})
	step(t1, 2000, conch.StepModelCall, agent.ModelCallDetail{Model: "gpt-test", DurationMS: 850, InputTokens: 880, OutputTokens: 12, StopReason: conch.StopEnd})
	msg(t1, 2000, conch.Message{Role: conch.RoleAssistant, Text: "Two files: `notes.md` and `plan ```v2```.txt`."})
	at(2100)
	if err := db.FinishTurn(ctx, t1, conch.TurnDone, ""); err != nil {
		t.Fatal(err)
	}

	t2 := inbound(60000, "Summarize the plan.", "m2")
	step(t2, 61200, conch.StepModelCall, agent.ModelCallDetail{Model: "gpt-test", DurationMS: 1200, InputTokens: 5600, OutputTokens: 300, StopReason: conch.StopEnd, Purpose: "summary"})
	step(t2, 61200, conch.StepCompaction, agent.CompactionDetail{Messages: 5, Kept: 1, TokensBefore: 5900, SummaryTokens: 300, Calls: 1, DurationMS: 1200, Window: 8192, Summary: "Alice keeps notes.md and a plan.\nShe wants summaries."})
	step(t2, 61300, conch.StepModelError, agent.ModelErrorDetail{Kind: conch.KindTransient, Error: "HTTP 529:\noverloaded", Attempt: 1})
	step(t2, 62500, conch.StepModelCall, agent.ModelCallDetail{Model: "gpt-test", DurationMS: 1100, InputTokens: 1400, OutputTokens: 40, StopReason: conch.StopEnd})
	msg(t2, 62500, conch.Message{Role: conch.RoleAssistant, Text: "The plan has two steps."})
	at(62600)
	if err := db.FinishTurn(ctx, t2, conch.TurnDone, ""); err != nil {
		t.Fatal(err)
	}
	return key
}

func runTranscript(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd(strings.NewReader(""), &out, &errOut)
	root.SetArgs(append([]string{"transcript"}, args...))
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("conch transcript %v: %v (stderr %q)", args, err, errOut.String())
	}
	return out.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestTranscriptFormats(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("CONCH_DATA_DIR", dir)
	key := transcriptStoreFixture(t, dir)

	golden(t, "transcript.md", runTranscript(t, key.String(), "--format", "md"))
	jl := runTranscript(t, key.String(), "--format", "jsonl")
	golden(t, "transcript.jsonl", jl)
	lines := strings.Split(strings.TrimSuffix(jl, "\n"), "\n")
	for i, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Errorf("line %d is not JSON: %v", i+1, err)
		}
	}

	one := runTranscript(t, key.String(), "--turn", "2", "--format", "jsonl")
	if strings.Contains(one, `"turn":1,`) || !strings.Contains(one, "The plan has two steps.") {
		t.Errorf("--turn 2 printed:\n%s", one)
	}
	var out, errOut bytes.Buffer
	root := newRootCmd(strings.NewReader(""), &out, &errOut)
	root.SetArgs([]string{"transcript", "cli:nobody"})
	if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "no turns") {
		t.Errorf("an unknown conversation: err %v", err)
	}
}
