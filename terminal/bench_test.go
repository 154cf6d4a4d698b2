package terminal_test

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/terminal"
	"conch/terminal/terminaltest"
)

// BenchmarkCompletion measures the time from a command's exit to the moment
// conch knows it finished, in one run and one sandbox, three ways:
//
//   - marker: this package (tmux control mode, the shell's prompt marker);
//   - settle: the same without markers, done after 1.5 s of quiet (seed 003);
//   - poll: capture-pane through an exec every 0.5 s until the prompt is the
//     last line (seed 001).
//
// The command prints its own exit time (date +%s%N, the last thing it
// does), so latency = time known done − that. Run with -benchtime=Nx.
func BenchmarkCompletion(b *testing.B) {
	for _, where := range []string{"container", "host"} {
		b.Run(where, func(b *testing.B) {
			var bx *terminaltest.Box
			if where == "container" {
				bx = terminaltest.Container(b)
			} else {
				bx = terminaltest.Host(b)
			}
			for _, mode := range []string{"marker", "settle", "poll"} {
				b.Run(mode, func(b *testing.B) { benchCompletion(b, bx, mode) })
			}
		})
	}
}

var stampRE = regexp.MustCompile(`(?m)^(\d{19})$`)

func benchCompletion(b *testing.B, bx *terminaltest.Box, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := bx.Opts
	if o.RunDir == "" {
		o.RunDir = terminal.DefaultRunDir
	}
	o.Socket = path.Join(o.RunDir, "bench-"+mode+".sock")
	o.NoMarkers = mode != "marker"
	m := terminal.NewManager(bx.SB, terminal.NewMemRegistry(), o)
	defer m.Detach()
	op, err := m.Open(ctx, "")
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	defer m.Close(ctx, op.TTY)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.Type(ctx, 0, "bash", "sleep 0.$((RANDOM % 5)); date +%s%N", true); err != nil {
			b.Fatalf("Type: %v", err)
		}
		var known time.Time
		var text string
		switch mode {
		case "poll":
			text = pollPrompt(ctx, b, bx.SB, o)
			known = time.Now()
			if _, err := m.Wait(ctx, 10*time.Second); err != nil { // observe, untimed
				b.Fatal(err)
			}
		default:
			res, err := m.Wait(ctx, 10*time.Second)
			known = time.Now()
			if err != nil {
				b.Fatal(err)
			}
			text = res.TTYs[0].Text
		}
		mm := stampRE.FindAllStringSubmatch(text, -1)
		if len(mm) == 0 {
			b.Fatalf("no timestamp in:\n%s", text)
		}
		ns, _ := strconv.ParseInt(mm[len(mm)-1][1], 10, 64)
		lat = append(lat, known.Sub(time.Unix(0, ns)))
	}
	b.StopTimer()
	slices.Sort(lat)
	p := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(p(0.5), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// pollPrompt is seed 001's loop: every 0.5 s, capture the pane with an exec
// and look for a timestamp followed by the prompt on the last line.
func pollPrompt(ctx context.Context, b *testing.B, sb conch.Sandbox, o terminal.Options) string {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		case <-tick.C:
		}
		res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"tmux", "-S", o.Socket, "capture-pane", "-p", "-t", "tty_0"}, Dir: o.Workspace})
		if err != nil {
			b.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(string(res.Output), "\n "), "\n")
		last := strings.TrimSpace(lines[len(lines)-1])
		if len(lines) >= 2 && stampRE.MatchString(lines[len(lines)-2]) && (strings.HasSuffix(last, "$") || strings.HasSuffix(last, "#")) {
			return fmt.Sprint(strings.Join(lines, "\n"))
		}
	}
}
