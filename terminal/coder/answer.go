package coder

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"conch"
	"conch/terminal"
)

// MaxTrackedFiles is how many files of the workspace a task's changes are
// tracked over; in a larger workspace they are not listed.
const MaxTrackedFiles = 20000

// ChangeKind is what happened to a file during a task.
type ChangeKind string

// Change kinds.
const (
	Created  ChangeKind = "created"
	Modified ChangeKind = "modified"
	Deleted  ChangeKind = "deleted"
)

// FileChange is a file of the workspace the task created, modified or
// deleted; Path is relative to the workspace.
type FileChange struct {
	Path string
	Kind ChangeKind
}

// The parts of the workspace whose changes are not a task's work,
// besides the CLI's own (Profile.Own, entries of the workspace's top):
// conch's files and caches at the top, version control, dependencies and
// bytecode anywhere. Each is a shell pattern for one path element.
var (
	untrackedTop      = []string{".conch", ".ipc", ".cache", ".npm", ".local", ".config"}
	untrackedAnywhere = []string{".git", "node_modules", "__pycache__"}
)

// pruned returns find's expression for what is not tracked.
func (c *Coder) pruned() string {
	var expr []string
	for _, p := range slices.Concat(untrackedTop, c.p.Own) {
		expr = append(expr, "-path "+shellQuote("./"+p))
	}
	for _, p := range untrackedAnywhere {
		expr = append(expr, "-path "+shellQuote("*/"+p))
	}
	return strings.Join(expr, " -o ")
}

// tracked reports whether rel, a path find listed, is outside what
// pruned leaves out. find prunes by name, but GNU find (4.9) still
// prints a pruned entry now and then when it is renamed away and back
// while find looks at it (the CLI writing its settings through a
// temporary file): the listing is filtered again here.
func (c *Coder) tracked(rel string) bool {
	elems := strings.Split(rel, "/")
	for _, p := range slices.Concat(untrackedTop, c.p.Own) {
		if ok, _ := path.Match(p, elems[0]); ok {
			return false
		}
	}
	for _, e := range elems {
		for _, p := range untrackedAnywhere {
			if ok, _ := path.Match(p, e); ok {
				return false
			}
		}
	}
	return true
}

// fileSet is the workspace's files when a task began: path → modification
// time and size. complete is false when there were more than
// MaxTrackedFiles, or they could not be listed.
type fileSet struct {
	stamps   map[string]string
	complete bool
}

// beginTurn clears the previous turn's answer, so the one read at the
// end of this turn is its own, and, for a new task, records the
// workspace's files, to tell at the end what the task changed. One call
// into the sandbox does both. When it fails, the turn goes on without:
// no answer is read (it could be the last turn's) and no files listed.
func (c *Coder) beginTurn(ctx context.Context, newTask bool) {
	if newTask {
		c.files = fileSet{}
	}
	files, err := c.sandboxFiles(ctx, true, newTask)
	c.answerCleared = err == nil
	if err == nil && newTask {
		c.files = files // the caller holds c.mu and waits for this before it reads them
	}
}

// endTurn fills in the CLI's final message, as its turn-end hook gave it,
// and the files changed since the task began (across Respond calls).
// Neither is essential: what cannot be read is left out.
func (c *Coder) endTurn(ctx context.Context, res *TurnResult) {
	var answer string
	var wg sync.WaitGroup
	if res.Hook && c.p.Answer != nil && c.answerCleared {
		wg.Go(func() {
			if payload, err := c.sb.ReadFile(ctx, c.answerFile(), 4<<20); err == nil {
				answer = c.p.Answer(payload, func(file string) ([]byte, error) { return c.tail(ctx, file) })
			}
		})
	}
	if c.files.complete {
		if after, err := c.sandboxFiles(ctx, false, true); err == nil {
			res.Changes, res.ChangesListed = diffFiles(c.files, after)
		}
	}
	wg.Wait()
	res.Answer = c.redact(answer)
}

// maxTail is how much of the end of a CLI's transcript is read for its
// answer.
const maxTail = 4 << 20

// tail returns the last maxTail bytes of a file in the sandbox.
func (c *Coder) tail(ctx context.Context, file string) ([]byte, error) {
	r, err := c.sb.Exec(ctx, conch.ExecRequest{Argv: []string{"tail", "-c", strconv.Itoa(maxTail), "--", file}, Timeout: 30 * time.Second, OutputLimit: maxTail})
	switch {
	case err != nil:
		return nil, err
	case r.ExitCode != 0:
		return nil, fmt.Errorf("tail %s: exit %d: %s", file, r.ExitCode, terminal.Elide(strings.Split(string(r.Output), "\n"), 3, 1, 1))
	}
	return r.Output, nil
}

// sandboxFiles removes the answer file (with clear) and lists the
// workspace's files (with scan).
func (c *Coder) sandboxFiles(ctx context.Context, clear, scan bool) (fileSet, error) {
	// find's status comes last ("#end 0" when it listed everything); head
	// cuts a list longer than MaxTrackedFiles before it. The CLI and the
	// user's terminals work while find runs: a file that vanishes between
	// find reading its name and looking at it (a settings file written
	// through a temporary one and renamed, as Claude Code does in its home,
	// the workspace) was simply not there, not a failed listing
	// (-ignore_readdir_race).
	script := `[ "$1" = 1 ] && rm -f -- "$2"; [ "$3" = 1 ] || exit 0; cd "$4" || exit 3; ` +
		`{ find . -mindepth 1 -ignore_readdir_race \( ` + c.pruned() + ` \) -prune -o -type f -printf '%P\t%T@\t%s\n' 2>/dev/null; echo "#end $?"; } | head -n ` +
		strconv.Itoa(MaxTrackedFiles+2)
	r, err := c.sb.Exec(ctx, conch.ExecRequest{
		Argv:        []string{"sh", "-c", script, "sh", flag(clear), c.answerFile(), flag(scan), c.s.Workspace()},
		Timeout:     time.Minute,
		OutputLimit: (MaxTrackedFiles + 1) * 512,
	})
	if err != nil {
		return fileSet{}, fmt.Errorf("coding agent: list the workspace's files: %w", err)
	}
	if !scan {
		return fileSet{}, nil
	}
	return parseFiles(string(r.Output), r.ExitCode == 0 && !r.Truncated, c.tracked), nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (c *Coder) answerFile() string { return terminal.AnswerFile(c.s.RunDir(), c.p.Name) }

// answerField is a Profile.Answer for a CLI whose hook payload holds the
// final message in the string field key (Claude Code's Stop hook, Codex's
// notify).
func answerField(key string) func([]byte, func(string) ([]byte, error)) string {
	return func(payload []byte, _ func(string) ([]byte, error)) string {
		var fields map[string]any
		if json.Unmarshal(payload, &fields) != nil {
			return ""
		}
		s, _ := fields[key].(string)
		return strings.TrimSpace(s)
	}
}

// geminiAnswer is Gemini CLI's Profile.Answer. Its AfterAgent payload's
// prompt_response joins the streamed pieces of the answer with spaces
// (words come out split and doubled), so the message is taken from the
// session transcript the payload names (transcript_path): JSON lines,
// each message as a record written before the hook runs, and written
// again whole when it changes; the last "gemini" record with text is the
// final message.
func geminiAnswer(payload []byte, tail func(string) ([]byte, error)) string {
	var hook struct {
		Transcript string `json:"transcript_path"`
	}
	if json.Unmarshal(payload, &hook) != nil || hook.Transcript == "" {
		return ""
	}
	data, err := tail(hook.Transcript)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(data), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var rec struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal([]byte(lines[i]), &rec) != nil || rec.Type != "gemini" {
			continue
		}
		var text string
		if json.Unmarshal(rec.Content, &text) == nil && strings.TrimSpace(text) != "" {
			return strings.TrimSpace(text)
		}
	}
	return ""
}

// parseFiles reads find's "path\tmtime\tsize" lines, then "#end" and
// find's status: the list is complete only when that says 0.
func parseFiles(out string, ok bool, tracked func(string) bool) fileSet {
	body, status, found := strings.Cut(out, "\n#end ")
	if !found && strings.HasPrefix(out, "#end ") {
		body, status, found = "", strings.TrimPrefix(out, "#end "), true
	}
	fs := fileSet{stamps: map[string]string{}, complete: ok && found && strings.TrimSpace(status) == "0"}
	for line := range strings.SplitSeq(body, "\n") {
		i := strings.LastIndexByte(line, '\t')
		if i < 0 {
			continue
		}
		j := strings.LastIndexByte(line[:i], '\t')
		if j <= 0 {
			continue
		}
		if tracked(line[:j]) {
			fs.stamps[line[:j]] = line[j+1:]
		}
	}
	if len(fs.stamps) > MaxTrackedFiles {
		fs.complete = false
	}
	return fs
}

// diffFiles returns what changed from before to after, by path; listed is
// false when either side is incomplete.
func diffFiles(before, after fileSet) (changes []FileChange, listed bool) {
	if !before.complete || !after.complete {
		return nil, false
	}
	for p, st := range after.stamps {
		old, ok := before.stamps[p]
		switch {
		case !ok:
			changes = append(changes, FileChange{p, Created})
		case old != st:
			changes = append(changes, FileChange{p, Modified})
		}
	}
	for p := range before.stamps {
		if _, ok := after.stamps[p]; !ok {
			changes = append(changes, FileChange{p, Deleted})
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	return changes, true
}
