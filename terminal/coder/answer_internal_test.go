package coder

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAnswer: the final message comes from each CLI's own hook payload,
// Gemini CLI's from the transcript its payload names.
func TestAnswer(t *testing.T) {
	transcript := strings.Join([]string{
		`{"sessionId":"s1","projectHash":"p","startTime":"2026-11-23T10:00:00Z"}`,
		`{"id":"u1","type":"user","content":[{"text":"What did I ask you before?"}]}`,
		`{"id":"g1","type":"gemini","content":"","toolCalls":[{"name":"run_shell_command"}]}`,
		`{"id":"g2","type":"gemini","content":"Before, you asked me"}`,
		`{"id":"g2","type":"gemini","content":"Before, you asked me to create hello.txt.\n"}`,
		`{"$set":{"lastUpdated":"2026-11-23T10:00:01Z"}}`,
		``,
	}, "\n")
	files := map[string]string{
		"/workspace/.gemini/tmp/workspace/chats/session-1.jsonl": transcript,
		"/workspace/.gemini/tmp/workspace/chats/cut.jsonl":       `cut": "half a record"}` + "\n" + `{"id":"u1","type":"user","content":"hi"}`,
	}
	tail := func(path string) ([]byte, error) {
		if data, ok := files[path]; ok {
			return []byte(data), nil
		}
		return nil, fmt.Errorf("tail %s: no such file", path)
	}
	for _, tc := range []struct {
		name    string
		p       Profile
		payload string
		want    string
	}{
		{"claude", Claude(), `{"hook_event_name":"Stop","stop_hook_active":false,"last_assistant_message":"I created hello.txt.\n"}`, "I created hello.txt."},
		{"codex", Codex(), `{"type":"agent-turn-complete","turn-id":"1","input-messages":["hi"],"last-assistant-message":"Done."}`, "Done."},
		{"gemini", Gemini(), `{"hook_event_name":"AfterAgent","transcript_path":"/workspace/.gemini/tmp/workspace/chats/session-1.jsonl","prompt_response":"Before,  you  asked"}`, "Before, you asked me to create hello.txt."},
		{"gemini without a model message", Gemini(), `{"transcript_path":"/workspace/.gemini/tmp/workspace/chats/cut.jsonl"}`, ""},
		{"gemini, transcript gone", Gemini(), `{"transcript_path":"/nowhere.jsonl","prompt_response":"x"}`, ""},
		{"gemini, no transcript", Gemini(), `{"prompt_response":"x"}`, ""},
		{"missing", Claude(), `{"hook_event_name":"Stop"}`, ""},
		{"not a string", Claude(), `{"last_assistant_message":{"text":"x"}}`, ""},
		{"not JSON", Claude(), `last_assistant_message: hi`, ""},
		{"empty", Codex(), ``, ""},
	} {
		if got := tc.p.Answer([]byte(tc.payload), tail); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestDiffFiles: created, modified (time or size) and deleted files, by
// path; nothing is claimed when a side is incomplete.
func TestDiffFiles(t *testing.T) {
	before := parseFiles("a.go\t100.5\t10\nsub dir/b.txt\t100.5\t3\ngone.md\t99.0\t1\nweird\tname\t100.0\t2\n#end 0\n", true, all)
	after := parseFiles("a.go\t100.5\t10\nsub dir/b.txt\t101.0\t3\nnew.txt\t102.0\t0\nweird\tname\t100.0\t4\nnot a line\n#end 0\n", true, all)
	got, listed := diffFiles(before, after)
	want := []FileChange{{"gone.md", Deleted}, {"new.txt", Created}, {"sub dir/b.txt", Modified}, {"weird\tname", Modified}}
	if !listed || !slices.Equal(got, want) {
		t.Errorf("got %v (listed %v), want %v", got, listed, want)
	}
	if got, listed := diffFiles(fileSet{}, after); listed || got != nil {
		t.Errorf("unknown start: got %v (listed %v), want nothing listed", got, listed)
	}
	for _, out := range []string{"a.go\t1.0\t1\n", "a.go\t1.0\t1\n#end 1\n", "#end 2\n"} {
		if fs := parseFiles(out, true, all); fs.complete {
			t.Errorf("%q: got a complete set, want incomplete (find failed or was cut)", out)
		}
	}
	if fs := parseFiles("#end 0\n", true, all); !fs.complete || len(fs.stamps) != 0 {
		t.Errorf("empty workspace: got %+v, want a complete empty set", fs)
	}
	var many strings.Builder
	for i := range MaxTrackedFiles + 1 {
		fmt.Fprintf(&many, "f%d\t1.0\t1\n", i)
	}
	many.WriteString("#end 0\n")
	if fs := parseFiles(many.String(), true, all); fs.complete {
		t.Errorf("%d files: got a complete set, want it marked incomplete", MaxTrackedFiles+1)
	}
}

// all tracks every path.
func all(string) bool { return true }

// TestTracked: what find prunes is also what the listing filters out
// again (GNU find prints a pruned entry renamed under it now and then):
// conch's and the CLI's own entries at the top, version control,
// dependencies and bytecode anywhere; nothing else.
func TestTracked(t *testing.T) {
	c := &Coder{p: Claude()}
	for rel, want := range map[string]bool{
		"hello.txt":                      true,
		"src/.claude.json":               true, // only the CLI's own at the top
		"src/.cache/x":                   true,
		".claude.json":                   false,
		".claude.json.tmp.42.1700000000": false,
		".claude/projects/a.jsonl":       false,
		".conch/run/x":                   false,
		".config":                        false,
		"a/b/.git/HEAD":                  false,
		".git":                           false,
		"web/node_modules/x/index.js":    false,
		"pkg/__pycache__/m.pyc":          false,
		"node_modules_notes.txt":         true,
	} {
		if got := c.tracked(rel); got != want {
			t.Errorf("tracked(%q) = %v, want %v", rel, got, want)
		}
	}
	fs := parseFiles("a.go\t1.0\t1\n.claude.json.tmp.1.2\t1.0\t1\n#end 0\n", true, c.tracked)
	if _, ok := fs.stamps["a.go"]; !ok || len(fs.stamps) != 1 || !fs.complete {
		t.Errorf("parse with the CLI's temporary file listed: got %+v, want a.go alone, complete", fs)
	}
}

// TestTurnResultString: the model reads the answer once (the screen's copy
// of it left out), the changed files, and the rest of the screen.
func TestTurnResultString(t *testing.T) {
	r := TurnResult{
		State:         TurnIdle,
		Hook:          true,
		Answer:        "I created hello.txt with the text hi.\nIt is in the workspace.",
		Text:          "> Create hello.txt\n✓  Shell printf hi > hello.txt\nhello.txt\n✦ I created hello.txt with the text hi.\n  It is in the workspace.",
		Changes:       []FileChange{{"hello.txt", Created}, {"old.txt", Deleted}},
		ChangesListed: true,
	}
	want := "The coding agent finished its turn.\nIts answer:\nI created hello.txt with the text hi.\nIt is in the workspace.\n" +
		"Files changed in the workspace: hello.txt (created), old.txt (deleted).\n" +
		"Its screen since the task:\n> Create hello.txt\n✓  Shell printf hi > hello.txt\nhello.txt"
	if got := r.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	r = TurnResult{State: TurnIdle, Text: "● Done", ChangesListed: true}
	if got, want := r.String(), "The coding agent finished its turn.\nFiles changed in the workspace: none.\n● Done"; got != want {
		t.Errorf("no answer, no changes: got\n%s\nwant\n%s", got, want)
	}
	r = TurnResult{State: TurnIdle, Text: "● Done"}
	if got := r.String(); strings.Contains(got, "Files changed") {
		t.Errorf("changes unknown: got %q, want no claim about files", got)
	}
	for i := range maxListedChanges + 5 {
		r.Changes = append(r.Changes, FileChange{fmt.Sprintf("f%02d", i), Created})
	}
	r.ChangesListed = true
	if got := r.String(); !strings.Contains(got, "f39 (created) and 5 more.") || strings.Contains(got, "f40") {
		t.Errorf("many changes: got %q, want the first %d and a count", got, maxListedChanges)
	}
}

// TestHookWhileBusyWaitsForTheScreen: the turn-end hook's marker ends the
// turn only once the screen no longer shows the CLI at work. A project's
// own blocking Stop hook makes Claude Code go on after conch's hook ran;
// answering at the marker would answer with the interim text and every
// later request with the answer before its own.
func TestHookWhileBusyWaitsForTheScreen(t *testing.T) {
	c := &Coder{p: Claude(), o: Options{Now: time.Now}}
	busy := []string{"✻ Running stop hooks… (esc to interrupt)"}
	idle := []string{"> "}
	var s snap
	s.TurnSeq = 5
	var res TurnResult
	if done, _, _ := c.turnEnded(&res, busy, s, 3); done {
		t.Fatalf("answered while the screen shows the CLI at work: %+v", res)
	}
	if done, _, _ := c.turnEnded(&res, idle, s, 3); !done || res.State != TurnIdle || !res.Hook {
		t.Fatalf("hook ran and screen idle: done=%v %+v, want answered by the hook", done, res)
	}
	res = TurnResult{}
	if done, _, _ := c.turnEnded(&res, idle, s, 5); done && res.Hook {
		t.Fatalf("an older marker (before the turn began) ended the turn: %+v", res)
	}
}
