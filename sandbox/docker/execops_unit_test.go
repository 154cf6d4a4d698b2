package docker

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"

	"github.com/moby/moby/client"
)

// slowExecEngine runs engine-exec programs in memory: the program of the
// first exec is slow to start (its trampoline tells its pid only after
// pidAfter) and then runs until a "kill" exec names its process group.
type slowExecEngine struct {
	engineAPI
	pidAfter time.Duration

	mu     sync.Mutex
	next   int
	execs  map[string]*fakeExec
	killed [][]string // argv of each kill exec
}

type fakeExec struct {
	argv    []string
	running bool
	code    int
	conn    net.Conn // the engine's end of the attached stream
}

const fakePid = 4242

func (f *slowExecEngine) ExecCreate(_ context.Context, _ string, o client.ExecCreateOptions) (client.ExecCreateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := fmt.Sprintf("exec%d", f.next)
	f.execs[id] = &fakeExec{argv: o.Cmd, running: true}
	return client.ExecCreateResult{ID: id}, nil
}

func (f *slowExecEngine) ExecAttach(_ context.Context, id string, _ client.ExecAttachOptions) (client.ExecAttachResult, error) {
	ours, theirs := net.Pipe()
	f.mu.Lock()
	ex := f.execs[id]
	ex.conn = theirs
	f.mu.Unlock()
	if slices.Contains(ex.argv, "kill") {
		f.mu.Lock()
		f.killed = append(f.killed, slices.Clone(ex.argv))
		for _, other := range f.execs {
			if other != ex && other.running && slices.Contains(ex.argv, fmt.Sprint(-fakePid)) {
				other.running, other.code = false, 137
				other.conn.Close()
			}
		}
		ex.running = false
		f.mu.Unlock()
		theirs.Close()
	} else {
		go func() {
			time.Sleep(f.pidAfter)
			_, _ = theirs.Write(frame(streamStdout, fmt.Sprintf("%d\n", fakePid))) // the trampoline's line; the program runs on
		}()
	}
	return client.ExecAttachResult{HijackedResponse: client.NewHijackedResponse(ours, "")}, nil
}

func (f *slowExecEngine) ExecInspect(_ context.Context, id string, _ client.ExecInspectOptions) (client.ExecInspectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ex := f.execs[id]
	return client.ExecInspectResult{ID: id, Running: ex.running, ExitCode: ex.code}, nil
}

// TestEngineExecTimeoutKillsALateStarter: a program whose time runs out
// before its trampoline told its pid (a loaded engine) is still killed,
// once the pid arrives, instead of left running while the call fails
// waiting for it to end.
func TestEngineExecTimeoutKillsALateStarter(t *testing.T) {
	f := &slowExecEngine{pidAfter: 300 * time.Millisecond, execs: map[string]*fakeExec{}}
	e := &engineOps{rt: &Runtime{api: f}, id: "box"}
	res, err := e.Exec(t.Context(), conch.ExecRequest{Argv: []string{"sleep", "300"}, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if res.Stopped != conch.StoppedTimeout {
		t.Errorf("got stopped %q, want timeout", res.Stopped)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.killed) != 1 || !strings.Contains(strings.Join(f.killed[0], " "), fmt.Sprint(-fakePid)) {
		t.Errorf("kills: got %q, want the process group of %d killed", f.killed, fakePid)
	}
}
