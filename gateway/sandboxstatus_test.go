package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"conch"
)

// viewAdmin is a conch.SandboxAdmin answering one view.
type viewAdmin struct {
	conch.SandboxAdmin
	info     conch.SandboxInfo
	infoErr  error
	stats    conch.SandboxStats
	statsErr error
}

func (a viewAdmin) SandboxInfo(context.Context, conch.ConversationKey) (conch.SandboxInfo, error) {
	return a.info, a.infoErr
}

func (a viewAdmin) SandboxStats(context.Context, conch.ConversationKey) (conch.SandboxStats, error) {
	return a.stats, a.statsErr
}

// TestSandboxStatus: /status's computer line for each case a backend's view
// can be in, with today's wording.
func TestSandboxStatus(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	key := conch.ConversationKey{Channel: "matrix", ID: "!a:example.org"}
	running := conch.SandboxInfo{Name: "conch-a", State: "running", Running: true, ImageCurrent: true, LastUsed: now.Add(-3 * time.Minute)}
	stopped := conch.SandboxInfo{Name: "conch-b", State: conch.SandboxExited, ImageCurrent: true, LastUsed: now.Add(-2*time.Hour - 5*time.Minute)}
	oom := stopped
	oom.OOMKilled, oom.ImageCurrent = true, false
	busy := running
	busy.Busy = true
	unused := running
	unused.LastUsed = time.Time{}
	paused := unused
	paused.State, paused.Running = "paused", false
	noState := conch.SandboxInfo{Name: "conch-c"}
	pids := conch.SandboxStats{PIDs: 9, PIDsLimit: 128, DiskBytes: -1}
	full := conch.SandboxStats{PIDs: 125, PIDsLimit: 128, DiskBytes: 3 << 20, DiskLimit: 64 << 20}
	for _, tc := range []struct {
		name  string
		admin viewAdmin
		want  string
	}{
		{"none yet", viewAdmin{infoErr: &conch.NoSandboxError{Key: key}},
			"Computer: none yet (created on first use)"},
		{"workspace kept", viewAdmin{infoErr: &conch.NoSandboxError{Key: key, Workspaces: []string{"conch-a"}}},
			"Computer: none now, workspace kept (a container is created on next use)"},
		{"running idle", viewAdmin{info: running, stats: pids},
			"Computer: conch-a, running, idle 3m, processes 9/128, image current"},
		{"busy at the limit with its quota", viewAdmin{info: busy, stats: full},
			"Computer: conch-a, running, busy, processes 125/128: at its limit, cannot start programs (recovered on next use), workspace 3 MiB of 64 MiB used, image current"},
		{"stopped", viewAdmin{info: stopped, stats: conch.SandboxStats{DiskBytes: -1, DiskLimit: 1 << 30}},
			"Computer: conch-b, stopped, restarted on next use, idle 2h5m, workspace limited to 1.0 GiB, image current"},
		{"out of memory", viewAdmin{info: oom, stats: conch.SandboxStats{DiskBytes: 5 << 10, DiskQuotaMissing: true}},
			"Computer: conch-b, stopped (out of memory), restarted on next use, idle 2h5m, workspace without a quota (made before sandbox.disk was set), image stale"},
		{"stopped processes not shown", viewAdmin{info: stopped, stats: pids},
			"Computer: conch-b, stopped, restarted on next use, idle 2h5m, image current"},
		{"other state", viewAdmin{info: paused, statsErr: errors.New("no stats")},
			"Computer: conch-a, paused, image current"},
		{"stats failing", viewAdmin{info: unused, statsErr: errors.New("no stats")},
			"Computer: conch-a, running, image current"},
		{"no state", viewAdmin{info: noState},
			"Computer: conch-c, unknown: the engine reported no state"},
		{"no conversation", viewAdmin{infoErr: conch.Errorf(conch.KindInvalid, "no conversation given")},
			"Computer: unknown: no conversation given"},
		{"engine away", viewAdmin{infoErr: &conch.Error{Kind: conch.KindUnavailable, User: "the sandbox could not be prepared", Err: errors.New("dial unix: refused")}},
			"Computer: unknown: the container engine does not answer"},
		{"engine slow", viewAdmin{infoErr: fmt.Errorf("inspect sandbox: %w", context.DeadlineExceeded)},
			"Computer: unknown: the container engine did not answer in time"},
		{"engine error", viewAdmin{infoErr: &conch.Error{Kind: conch.KindInternal, User: "the sandbox could not be prepared", Err: errors.New("500 secret detail")}},
			"Computer: unknown: the container engine reported an error (see the logs)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SandboxStatus(context.Background(), tc.admin, key, now, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if strings.Contains(got, "secret") {
				t.Errorf("the engine's detail reached the chat: %q", got)
			}
		})
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{-time.Second: "0s", 45 * time.Second: "45s", 3 * time.Minute: "3m",
		2 * time.Hour: "2h", 2*time.Hour + 5*time.Minute: "2h5m", 100 * time.Hour: "4d"} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s): got %q, want %q", d, got, want)
		}
	}
}
