package coder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"conch/terminal/terminaltest"
)

// workspaceOnly is a Session that only knows its directories: all that
// listing the workspace's files needs.
type workspaceOnly struct {
	Session
	ws, run string
}

func (w workspaceOnly) Workspace() string { return w.ws }
func (w workspaceOnly) RunDir() string    { return w.run }

// TestFilesWhileTheCLIWrites: the CLI keeps writing its own files while
// the workspace is listed (Claude Code writes .claude.json in its home,
// the workspace, through a temporary file it renames). Neither a file
// that vanishes mid-listing (GNU find fails about one listing in twenty
// of this without -ignore_readdir_race, and the turn then reports no
// changes at all) nor a pruned entry find prints anyway (about one in a
// few thousand) may change what is listed.
func TestFilesWhileTheCLIWrites(t *testing.T) {
	b := terminaltest.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := FakeCLI("fakecli", 0)
	p.Own = append(p.Own, ".state*")
	c := &Coder{sb: b.SB, p: p, o: Options{Now: time.Now}, s: workspaceOnly{ws: b.Opts.Workspace, run: b.Opts.RunDir}}
	for i := range 200 {
		if err := os.WriteFile(filepath.Join(b.Opts.Workspace, fmt.Sprintf("f%03d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tmp, state := filepath.Join(b.Opts.Workspace, ".state.tmp"), filepath.Join(b.Opts.Workspace, ".state")
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := os.WriteFile(tmp, []byte("{}"), 0o644); err == nil {
				os.Rename(tmp, state)
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	for i := range 100 {
		fs, err := c.sandboxFiles(ctx, false, true)
		if err != nil {
			t.Fatal(err)
		}
		if !fs.complete || len(fs.stamps) != 200 {
			for f := range fs.stamps {
				if len(f) != 4 || f[0] != 'f' {
					t.Errorf("listed %q", f)
				}
			}
			t.Fatalf("listing %d while the CLI writes its own files: complete=%v with %d files, want complete with 200", i, fs.complete, len(fs.stamps))
		}
	}
}
