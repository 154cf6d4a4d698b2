package terminal

import (
	"fmt"
	"strings"
	"testing"
)

func TestDecodeOctal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`plain`, "plain"},
		{`a\015\012b`, "a\r\nb"},
		{`back\134slash`, `back\slash`},
		{`\033]7770;x\007`, "\x1b]7770;x\a"},
		{`short\01`, `short\01`},
		{`not\8xx`, `not\8xx`},
		{"caf\xc3\xa9", "café"},
	} {
		if got := string(decodeOctal([]byte(tc.in))); got != tc.want {
			t.Errorf("decodeOctal(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMarkerScanner(t *testing.T) {
	full := "out\x1b]7770;conch;n1;start\a more \x1b]7770;conch;n1;done;2;/work space\a" +
		"\x1b]7770;conch;other;done;0;/\a\x1b]7770;conch;n1;bogus\a\x1b]7770;conch;n1;exit;x\a" +
		"\x1b]7770;conch;n1;turn;claude\a\x1b]7770;conch;n1;ready;codex\a"
	want := "[{start 0 } {done 2 /work space} {turn 0 claude} {ready 0 codex}]"
	// Every way of cutting the stream in two gives the same markers.
	for cut := 0; cut <= len(full); cut++ {
		s := markerScanner{nonce: "n1"}
		got := append(s.scan([]byte(full[:cut])), s.scan([]byte(full[cut:]))...)
		if fmt.Sprint(got) != want {
			t.Fatalf("cut at %d: got %v, want %v", cut, got, want)
		}
	}
	// One byte at a time.
	s := markerScanner{nonce: "n1"}
	var got []marker
	for i := range len(full) {
		got = append(got, s.scan([]byte{full[i]})...)
	}
	if fmt.Sprint(got) != want {
		t.Fatalf("byte by byte: got %v, want %v", got, want)
	}
	// Without a nonce nothing is trusted.
	none := markerScanner{}
	if got := none.scan([]byte(full)); len(got) != 0 {
		t.Errorf("no nonce: got %v, want no markers", got)
	}
	// An unterminated "marker" longer than the limit is dropped.
	long := markerScanner{nonce: "n1"}
	long.scan([]byte("\x1b]7770;conch;n1;done;0;" + strings.Repeat("x", maxMarker)))
	if len(long.partial) != 0 {
		t.Errorf("overlong marker kept %d bytes", len(long.partial))
	}
}

// TestPasteScanner: bracketed paste switched on and off, however the
// stream is cut; the last change in a chunk wins.
func TestPasteScanner(t *testing.T) {
	for _, tc := range []struct {
		stream string
		want   []int // the mode after the whole stream: the last non-zero change
	}{
		{"plain text", nil},
		{"draw\x1b[?2004hready", []int{1}},
		{"\x1b[?2004h shell prompt \x1b[?2004l running", []int{-1}},
		{"\x1b[?2004l\x1b[?1049h tui \x1b[?2004h", []int{1}},
		{"\x1b[?20041h not it", nil},
	} {
		for cut := 0; cut <= len(tc.stream); cut++ {
			var s pasteScanner
			var got []int
			for _, part := range []string{tc.stream[:cut], tc.stream[cut:]} {
				if c := s.scan([]byte(part)); c != 0 {
					got = append(got, c)
				}
			}
			last := 0
			if len(got) > 0 {
				last = got[len(got)-1]
			}
			want := 0
			if len(tc.want) > 0 {
				want = tc.want[0]
			}
			if last != want {
				t.Fatalf("%q cut at %d: got changes %v, want the last to be %d", tc.stream, cut, got, want)
			}
		}
	}
}

func TestKeysAndTyping(t *testing.T) {
	for _, tc := range []struct {
		text string
		keys []string
	}{
		{"C-c", []string{"C-c"}},
		{"Up Up Enter", []string{"Up", "Up", "Enter"}},
		{"M-x", []string{"M-x"}},
		{"C-Left", []string{"C-Left"}},
		{"ls -la", nil},
		{"Enter the dragon", nil},
		{"", nil},
		{"C-", nil},
	} {
		if got := parseKeys(tc.text); fmt.Sprint(got) != fmt.Sprint(tc.keys) {
			t.Errorf("parseKeys(%q): got %v, want %v", tc.text, got, tc.keys)
		}
	}
	got := typeCommands("%1", "echo 'it''s'\ttab\r\nnext")
	want := []string{
		`send-keys -t '%1' -l 'echo '\''it'\'''\''s'\'''`,
		`send-keys -t '%1' -H 09`,
		`send-keys -t '%1' -l 'tab'`,
		`send-keys -t '%1' Enter`,
		`send-keys -t '%1' -l 'next'`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("typeCommands:\ngot  %q\nwant %q", got, want)
	}
}

func TestControlParser(t *testing.T) {
	ev := &recorder{}
	c := &control{ev: ev}
	first := make(chan reply, 1)
	mine := make(chan reply, 1)
	failed := make(chan reply, 1)
	c.pending = []chan reply{first, mine, failed}
	p := &parser{c: c}
	var lb lineBuffer
	stream := "%begin 1 1 0\n%end 1 1 0\n%output %3 a\\015\\012b\n%begin 1 2 1\nline one\n%output lookalike\n%end 1 2 1\n" +
		"%window-renamed @1 bash[dead]\n%subscription-changed conch-dead $0 - - - : 1\n%begin 1 3 0\n%end 1 3 0\n%begin 1 4 1\nno such pane\n%error 1 4 1\n%exit\n"
	for i := 0; i < len(stream); i += 7 {
		lb.feed([]byte(stream[i:min(i+7, len(stream))]), p.line)
	}
	if r := <-first; r.err != nil || len(r.lines) != 0 {
		t.Errorf("command line reply: got %+v", r)
	}
	if r := <-mine; r.err != nil || fmt.Sprint(r.lines) != "[line one %output lookalike]" {
		t.Errorf("reply: got %+v, want the two lines", r)
	}
	if r := <-failed; r.err == nil || !strings.Contains(r.err.Error(), "no such pane") {
		t.Errorf("failed reply: got %+v, want an error with the message", r)
	}
	if fmt.Sprint(ev.events) != `[output %3 "a\r\nb" renamed @1 bash[dead] subscription conch-dead 1]` {
		t.Errorf("events: got %v", ev.events)
	}
}

type recorder struct{ events []string }

func (r *recorder) output(pane string, data []byte) {
	r.events = append(r.events, fmt.Sprintf("output %s %q", pane, data))
}
func (r *recorder) renamed(w, name string) { r.events = append(r.events, "renamed "+w+" "+name) }
func (r *recorder) subscription(name, value string) {
	r.events = append(r.events, "subscription "+name+" "+value)
}
func (r *recorder) ended(error) {}

// An exit status that never arrived is said to be unknown, never 0.
func TestObservationExitStatusWording(t *testing.T) {
	known := Observation{TTY: 2, State: StateExited, Exit: 3}.String()
	if !strings.Contains(known, "exited with status 3; terminal closed") {
		t.Errorf("known status: %q", known)
	}
	unknown := Observation{TTY: 2, State: StateExited, ExitUnknown: true}.String()
	if !strings.Contains(unknown, "exit status unknown") || strings.Contains(unknown, "status 0") {
		t.Errorf("unknown status: %q", unknown)
	}
}

// A program killed by a signal is said so, with no status.
func TestObservationSignalWording(t *testing.T) {
	got := Observation{TTY: 2, State: StateExited, Signal: "9"}.String()
	if !strings.Contains(got, "killed by signal 9; terminal closed") || strings.Contains(got, "status") {
		t.Errorf("killed: %q", got)
	}
}

// What display-message tells of a live pane, one that exited and one that
// a signal killed.
func TestParsePaneInfo(t *testing.T) {
	for _, c := range []struct {
		line string
		want paneInfo
	}{
		{"12 48 0 - - bash", paneInfo{hist: 12, height: 48, current: "bash"}},
		{"0 48 1 7 - bash", paneInfo{height: 48, dead: true, deadStatus: 7, statusKnown: true, current: "bash"}},
		{"0 48 1 - 9 python3", paneInfo{height: 48, dead: true, deadSignal: "9", current: "python3"}},
		{"0 48 1 - - ", paneInfo{height: 48, dead: true}},
	} {
		got, err := parsePaneInfo([]string{c.line})
		if err != nil || got != c.want {
			t.Errorf("parsePaneInfo(%q): got %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
	if _, err := parsePaneInfo([]string{"0 48 1 -"}); err == nil {
		t.Error("parsePaneInfo of a short line: no error")
	}
}
