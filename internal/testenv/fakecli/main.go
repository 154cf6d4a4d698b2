// Command fakecli imitates the hard parts of an interactive coding-agent CLI
// (Gemini CLI, Claude Code, Codex) for terminal tests:
//
//   - a first-run screen unless its settings file says it was dismissed;
//   - a boxed input line at the bottom and a footer, so the last line is
//     never a bare prompt;
//   - a spinner with "esc to interrupt" while it works;
//   - a permission menu for tasks that mention "permission";
//   - an Enter that arrives less than 300 ms after typed text is swallowed;
//   - a turn-end hook (settings "hooks.stop", run with sh -c) after every
//     turn, run while the spinner still shows, which goes hookLinger after
//     the hook returned (as Claude Code's does);
//   - a task containing "crash" makes it exit with status 3;
//   - a task containing "show base url" shows its FAKECLI_BASE_URL;
//   - start-up takes settings "startup_ms": the input box is drawn at once
//     but every key that comes before start-up ends is dropped (as Codex
//     and Gemini CLI lose a first task typed too early); then it switches
//     bracketed paste on and runs its session-start hook ("hooks.start");
//   - --yolo: permission menus are skipped (full-auto mode);
//   - every task is recorded in $HOME/.fakecli/session; --continue loads
//     it (and fails, status 1, when there is none), and a task containing
//     "what did I ask" lists the earlier tasks of the session;
//   - a task containing "create file NAME" writes NAME in its working
//     directory;
//   - with FAKECLI_LOSE_FIRST_INPUT set, the first input after start-up
//     is dropped without a trace on the screen;
//   - a turn-end hook gets {"last_assistant_message": "Done: <task>"} on
//     its standard input, as Claude Code's Stop hook does;
//   - a task containing "spawn helper" leaves a helper process (sleep)
//     running in a session of its own, as the real CLIs' daemons do.
//
// It is a full-screen program drawing in place (cursor addressing, no
// alternate screen), reading its terminal in raw mode. Tests build it with
// CGO_ENABLED=0 and copy it into the sandbox. Settings live in
// $HOME/.fakecli/settings.json: {"onboarded": true, "hooks": {"stop": "cmd"}}.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// swallowWindow is how soon after typed text an Enter is ignored.
const swallowWindow = 300 * time.Millisecond

// hookLinger is how long the spinner stays after the turn-end hook.
const hookLinger = 150 * time.Millisecond

type settings struct {
	Onboarded bool `json:"onboarded"`
	StartupMS int  `json:"startup_ms"`
	Hooks     struct {
		Stop  string `json:"stop"`
		Start string `json:"start"`
	} `json:"hooks"`
}

type app struct {
	set        settings
	transcript []string
	input      []rune
	lastText   time.Time
	status     string // spinner line while busy
	menu       []string
	width      int
	height     int
	keys       chan byte
	yolo       bool
	session    string   // file of the session's tasks
	earlier    []string // tasks of the session before this run
}

func main() {
	a := &app{width: 80, height: 24, keys: make(chan byte, 256)}
	resume := false
	for _, arg := range os.Args[1:] {
		switch arg {
		case "--yolo":
			a.yolo = true
		case "--continue":
			resume = true
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		if b, err := os.ReadFile(filepath.Join(home, ".fakecli", "settings.json")); err == nil {
			_ = json.Unmarshal(b, &a.set)
		}
		a.session = filepath.Join(home, ".fakecli", "session")
	}
	if resume {
		b, err := os.ReadFile(a.session)
		if err != nil || len(b) == 0 {
			fmt.Println("No conversation found to continue")
			os.Exit(1)
		}
		a.earlier = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	} else {
		_ = os.Remove(a.session)
	}
	raw := exec.Command("stty", "raw", "-echo")
	raw.Stdin = os.Stdin
	_ = raw.Run()
	defer func() {
		sane := exec.Command("stty", "sane")
		sane.Stdin = os.Stdin
		_ = sane.Run()
	}()
	a.size()
	go func() {
		b := make([]byte, 256)
		for {
			n, err := os.Stdin.Read(b)
			for _, c := range b[:n] {
				a.keys <- c
			}
			if err != nil {
				close(a.keys)
				return
			}
		}
	}()
	os.Exit(a.run())
}

func (a *app) size() {
	cmd := exec.Command("stty", "size")
	cmd.Stdin = os.Stdin
	out, err := cmd.Output()
	if err != nil {
		return
	}
	var h, w int
	if _, err := fmt.Sscan(string(out), &h, &w); err == nil && h > 5 && w > 20 {
		a.height, a.width = h, w
	}
}

func (a *app) run() int {
	if !a.set.Onboarded {
		a.transcript = []string{"Welcome to fakecli!", "", "Choose a theme:", "❯ 1. Dark", "  2. Light", "", "Press Enter to continue"}
		a.draw()
		for c := range a.keys {
			if c == '\r' {
				break
			}
		}
		a.transcript = nil
	}
	a.transcript = append(a.transcript, "fakecli 1.0 — a test double of a coding agent", "")
	if len(a.earlier) > 0 {
		a.transcript = append(a.transcript, fmt.Sprintf("Resumed a session of %d tasks.", len(a.earlier)))
	}
	a.draw()
	if a.set.StartupMS > 0 {
		// Still starting: the box is drawn, but keys are dropped.
		end := time.After(time.Duration(a.set.StartupMS) * time.Millisecond)
	starting:
		for {
			select {
			case _, ok := <-a.keys:
				if !ok {
					return 0
				}
			case <-end:
				break starting
			}
		}
	}
	os.Stdout.WriteString("\x1b[?2004h")
	defer os.Stdout.WriteString("\x1b[?2004l")
	if a.set.Hooks.Start != "" {
		_ = exec.Command("sh", "-c", a.set.Hooks.Start).Run()
	}
	if os.Getenv("FAKECLI_LOSE_FIRST_INPUT") != "" && !a.dropBurst() {
		return 0
	}
	for {
		c, ok := <-a.keys
		if !ok {
			return 0
		}
		switch {
		case c == 3: // C-c
			a.transcript = append(a.transcript, "bye")
			a.draw()
			return 0
		case c == '\r':
			if time.Since(a.lastText) < swallowWindow || len(a.input) == 0 {
				continue // swallowed, as the real CLIs do
			}
			task := string(a.input)
			a.input = nil
			if code, exit := a.turn(task); exit {
				return code
			}
		case c == 127:
			if len(a.input) > 0 {
				a.input = a.input[:len(a.input)-1]
			}
			a.draw()
		case c == 27:
			a.skipPasteMark()
		case c >= ' ':
			a.input = append(a.input, []rune(a.readRune(c))...)
			a.lastText = time.Now()
			a.draw()
		}
	}
}

// inputLine is the input box's text: what was typed, or its placeholder.
func (a *app) inputLine() string {
	if len(a.input) == 0 {
		return placeholder
	}
	return string(a.input)
}

// placeholder fills the empty input box, as the real CLIs' do.
const placeholder = "(type a task)"

// dropBurst waits for the first keys and drops them, up to a pause, drawing
// nothing: a CLI that looked ready but was not (Gemini CLI loading a
// resumed session) loses the first input. It returns false when the
// terminal closed.
func (a *app) dropBurst() bool {
	if _, ok := <-a.keys; !ok {
		return false
	}
	for {
		select {
		case _, ok := <-a.keys:
			if !ok {
				return false
			}
		case <-time.After(300 * time.Millisecond):
			return true
		}
	}
}

// skipPasteMark reads the rest of a bracketed-paste mark (ESC [ 200~ or
// ESC [ 201~) after its ESC; the pasted text between is taken as typed.
func (a *app) skipPasteMark() {
	for c := range a.keys {
		if c == '~' {
			return
		}
	}
}

// readRune completes a UTF-8 sequence that begins with c.
func (a *app) readRune(c byte) string {
	buf := []byte{c}
	need := 0
	switch {
	case c >= 0xf0:
		need = 3
	case c >= 0xe0:
		need = 2
	case c >= 0xc0:
		need = 1
	}
	for range need {
		if n, ok := <-a.keys; ok {
			buf = append(buf, n)
		}
	}
	return string(buf)
}

var ipcPath = regexp.MustCompile(`/\S*\.ipc/\S+`)
var createFile = regexp.MustCompile(`create file ([\w.-]+)`)
var workFor = regexp.MustCompile(`work (\d+(?:\.\d+)?)s`)

// turn works on one task; it reports an exit code when the program ends.
func (a *app) turn(task string) (int, bool) {
	a.transcript = append(a.transcript, "> "+task)
	if f, err := os.OpenFile(a.session, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintln(f, task)
		f.Close()
	}
	prev := a.earlier[:len(a.earlier):len(a.earlier)]
	a.earlier = append(prev, task)
	d := 500 * time.Millisecond
	if m := workFor.FindStringSubmatch(task); m != nil {
		var s float64
		fmt.Sscan(m[1], &s)
		d = time.Duration(s * float64(time.Second))
	}
	if interrupted := a.busy(d); interrupted {
		a.transcript = append(a.transcript, "Interrupted.")
		a.status = ""
		a.draw()
		return 0, false
	}
	if strings.Contains(task, "crash") {
		a.transcript = append(a.transcript, "fatal: simulated crash")
		a.status = ""
		a.draw()
		return 3, true
	}
	if strings.Contains(task, "permission") && a.yolo {
		a.transcript = append(a.transcript, "permission auto-granted (yolo)")
	} else if strings.Contains(task, "permission") {
		a.status = ""
		a.menu = []string{"Allow fakecli to run `make deploy`?", "❯ 1. Yes, allow once", "  2. No, and tell fakecli what to do differently (esc)"}
		a.draw()
		answer := ""
		for c := range a.keys {
			if c == '1' || c == '\r' {
				answer = "granted"
			} else if c == '2' || c == 27 {
				answer = "denied"
			} else {
				continue
			}
			break
		}
		a.menu = nil
		a.transcript = append(a.transcript, "permission "+answer)
		a.busy(200 * time.Millisecond)
	}
	if strings.Contains(task, "show base url") {
		a.transcript = append(a.transcript, "base url: "+os.Getenv("FAKECLI_BASE_URL"))
	}
	if strings.Contains(task, "what did I ask") {
		a.transcript = append(a.transcript, fmt.Sprintf("Earlier you asked: %s", strings.Join(prev, " | ")))
	}
	if m := createFile.FindStringSubmatch(task); m != nil {
		if err := os.WriteFile(m[1], []byte("written by fakecli\n"), 0o644); err != nil {
			a.transcript = append(a.transcript, "cannot create "+m[1]+": "+err.Error())
		}
	}
	if strings.Contains(task, "spawn helper") {
		helper := exec.Command("setsid", "sleep", "1000")
		if err := helper.Start(); err == nil {
			a.transcript = append(a.transcript, fmt.Sprintf("helper %d started", helper.Process.Pid))
			_ = helper.Process.Release()
		}
	}
	if p := ipcPath.FindString(task); p != "" {
		if b, err := os.ReadFile(strings.TrimRight(p, ".,;:")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			a.transcript = append(a.transcript, fmt.Sprintf("task file says: %s (%d bytes)", first, len(b)))
		} else {
			a.transcript = append(a.transcript, "cannot read task file: "+err.Error())
		}
	}
	// As Claude Code: the answer is drawn and the turn-end hook runs
	// while the spinner still shows; it goes only a moment after the
	// hook returned.
	a.transcript = append(a.transcript, "● Done: "+task, "")
	a.draw()
	if a.set.Hooks.Stop != "" {
		cmd := exec.Command("sh", "-c", a.set.Hooks.Stop)
		payload, _ := json.Marshal(map[string]string{"hook_event_name": "Stop", "last_assistant_message": "Done: " + task})
		cmd.Stdin = strings.NewReader(string(payload))
		_ = cmd.Run()
		if a.status != "" {
			time.Sleep(hookLinger)
		}
	}
	a.status = ""
	a.draw()
	return 0, false
}

// busy shows a spinner for d; Esc interrupts it.
func (a *app) busy(d time.Duration) (interrupted bool) {
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	end := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; time.Now().Before(end); i++ {
		a.status = fmt.Sprintf("%s Working… (%ds · esc to interrupt)", frames[i%len(frames)], int(time.Until(end).Seconds()))
		a.draw()
		select {
		case c := <-a.keys:
			if c == 27 {
				return true
			}
		case <-tick.C:
		}
	}
	return false
}

// draw paints the whole screen in place: transcript, status or menu, input
// box, footer.
func (a *app) draw() {
	inner := a.width - 4
	box := []string{
		"╭" + strings.Repeat("─", a.width-2) + "╮",
		"│ > " + pad(a.inputLine(), inner-2) + " │",
		"╰" + strings.Repeat("─", a.width-2) + "╯",
		" fakecli · /workspace · ? for shortcuts",
	}
	var mid []string
	if a.status != "" {
		mid = append(mid, a.status)
	}
	mid = append(mid, a.menu...)
	room := a.height - len(box) - len(mid)
	lines := a.transcript
	if len(lines) > room {
		lines = lines[len(lines)-room:]
	}
	var b strings.Builder
	b.WriteString("\x1b[H")
	for _, l := range append(append(append([]string{}, lines...), mid...), box...) {
		b.WriteString(l)
		b.WriteString("\x1b[K\r\n")
	}
	b.WriteString("\x1b[J")
	out := b.String()
	out = strings.TrimSuffix(out, "\r\n\x1b[J") + "\x1b[J"
	os.Stdout.WriteString(out)
}

func pad(s string, n int) string {
	r := []rune(s)
	if len(r) >= n {
		return string(r[len(r)-n:])
	}
	return s + strings.Repeat(" ", n-len(r))
}
