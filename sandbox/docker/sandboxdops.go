package docker

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"

	"conch"
	"conch/sandbox/sandboxd"
)

// oomCounterFiles hold the memory cgroup's oom_kill counter as the
// container sees it: cgroup v2, then v1.
var oomCounterFiles = []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"}

// sandboxdOps is the sandboxd's client plus the OOM confirmation the
// agent cannot always make itself (it reads only the cgroup v2 counter).
type sandboxdOps struct {
	*sandboxd.Client

	mu      sync.Mutex
	oomBase int64 // counter at the last check; -1 unknown
}

var _ sandboxOps = (*sandboxdOps)(nil)

// Exec records the oom_kill counter before the container's first program,
// so that a later SIGKILL can be attributed.
func (a *sandboxdOps) Exec(ctx context.Context, req conch.ExecRequest) (conch.ExecResult, error) {
	a.mu.Lock()
	need := a.oomBase < 0
	a.mu.Unlock()
	if need {
		if n, ok := a.oomKills(ctx); ok {
			a.mu.Lock()
			if a.oomBase < 0 {
				a.oomBase = n
			}
			a.mu.Unlock()
		}
	}
	return a.Client.Exec(ctx, req)
}

// confirmOOM is asked after a program died of SIGKILL: true when the
// container's memory cgroup killed something since the last check.
func (a *sandboxdOps) confirmOOM(ctx context.Context) bool {
	n, ok := a.oomKills(ctx)
	if !ok {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	killed := a.oomBase >= 0 && n > a.oomBase
	a.oomBase = n
	return killed
}

func (a *sandboxdOps) oomKills(ctx context.Context) (int64, bool) {
	for _, f := range oomCounterFiles {
		b, err := a.Client.ReadFile(ctx, f, 64<<10)
		if err != nil {
			continue
		}
		if n, ok := parseOOMKill(b); ok {
			return n, true
		}
	}
	return -1, false
}

func parseOOMKill(b []byte) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return -1, false
}
