// Command fakecli imitates the hard parts of an interactive coding-agent CLI
// (Gemini CLI, Claude Code, Codex) for terminal tests:
//
//   - a first-run screen unless its settings file says it was dismissed;
//   - a boxed input line at the bottom and a footer, so the last line is
//     never a bare prompt;
//   - a spinner with "esc to interrupt" while it works;
//   - a permission menu for tasks that mention "permission";
//   - an Enter that arrives less than 300 ms after typed text is swallowed;
//   - a turn-end hook (settings "hooks.stop", run with sh -c) after every turn;
//   - a task containing "crash" makes it exit with status 3;
//   - a task containing "show proxy" shows its HTTPS_PROXY.
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

type settings struct {
	Onboarded bool `json:"onboarded"`
	Hooks     struct {
		Stop string `json:"stop"`
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
}

func main() {
	a := &app{width: 80, height: 24, keys: make(chan byte, 256)}
	if home, err := os.UserHomeDir(); err == nil {
		if b, err := os.ReadFile(filepath.Join(home, ".fakecli", "settings.json")); err == nil {
			_ = json.Unmarshal(b, &a.set)
		}
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
	a.draw()
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
		case c >= ' ':
			a.input = append(a.input, []rune(a.readRune(c))...)
			a.lastText = time.Now()
			a.draw()
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
var workFor = regexp.MustCompile(`work (\d+(?:\.\d+)?)s`)

// turn works on one task; it reports an exit code when the program ends.
func (a *app) turn(task string) (int, bool) {
	a.transcript = append(a.transcript, "> "+task)
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
	if strings.Contains(task, "permission") {
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
	if strings.Contains(task, "show proxy") {
		a.transcript = append(a.transcript, "proxy: "+os.Getenv("HTTPS_PROXY"))
	}
	if p := ipcPath.FindString(task); p != "" {
		if b, err := os.ReadFile(strings.TrimRight(p, ".,;:")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			a.transcript = append(a.transcript, fmt.Sprintf("task file says: %s (%d bytes)", first, len(b)))
		} else {
			a.transcript = append(a.transcript, "cannot read task file: "+err.Error())
		}
	}
	a.transcript = append(a.transcript, "● Done: "+task, "")
	a.status = ""
	a.draw()
	if a.set.Hooks.Stop != "" {
		cmd := exec.Command("sh", "-c", a.set.Hooks.Stop)
		cmd.Stdin = strings.NewReader(`{"hook_event_name":"Stop"}`)
		_ = cmd.Run()
	}
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
		"│ > " + pad(string(a.input), inner-2) + " │",
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
