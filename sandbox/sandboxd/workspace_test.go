package sandboxd_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv"
	"conch/sandbox/sandboxd/sandboxdtest"
)

// TestReadWorkspaceFile: a file leaves the sandbox only when it is a
// regular file under /workspace reached without a symbolic link; every
// refusal is a clear invalid-input error, and a FIFO does not block.
func TestReadWorkspaceFile(t *testing.T) {
	dir := t.TempDir()
	sb := sandboxdtest.HostSandbox(t, dir)
	ws := filepath.Join(dir, "workspace")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(ws, "out", "deep"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "out", "chart.png"), []byte("PNG-DATA"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "out", "deep", "a.txt"), []byte("deep"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "secret"), []byte("host secret"), 0o600))
	must(os.Symlink("/etc/passwd", filepath.Join(ws, "passwd")))
	must(os.Symlink(filepath.Join(ws, "out"), filepath.Join(ws, "linkdir")))
	must(os.Symlink("chart.png", filepath.Join(ws, "out", "rel-link.png")))
	must(syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	for _, p := range []string{"/workspace/out/chart.png", "out/chart.png", "/workspace/./out//chart.png"} {
		got, err := sb.ReadWorkspaceFile(ctx, p, 1<<20)
		if err != nil || string(got) != "PNG-DATA" {
			t.Fatalf("ReadWorkspaceFile(%q) = %q, %v", p, got, err)
		}
	}
	if got, err := sb.ReadWorkspaceFile(ctx, "/workspace/out/deep/a.txt", 0); err != nil || string(got) != "deep" {
		t.Fatalf("nested file: %q, %v", got, err)
	}
	refused := []struct{ path, want string }{
		{"/workspace/passwd", "symbolic link"},
		{"/workspace/linkdir/chart.png", "symbolic link"},
		{"/workspace/out/rel-link.png", "symbolic link"},
		{"/workspace/out/../out/chart.png", `".."`},
		{"../secret", `".."`},
		{"/workspace/..", `".."`},
		{"/etc/passwd", "outside /workspace"},
		{"/workspace", "directory"},
		{"/workspace/out", "directory"},
		{"/workspace/fifo", "not a regular file (a FIFO)"},
		{"/workspace/missing.png", "does not exist"},
		{"/workspace/out/chart.png/x", "not a directory"},
	}
	for _, c := range refused {
		got, err := sb.ReadWorkspaceFile(ctx, c.path, 1<<20)
		if err == nil || !strings.Contains(err.Error(), c.want) || got != nil {
			t.Errorf("ReadWorkspaceFile(%q) = %q, %v; want an error saying %q", c.path, got, err, c.want)
			continue
		}
		if k := conch.KindOf(err); k != conch.KindInvalid && k != conch.KindNotFound {
			t.Errorf("ReadWorkspaceFile(%q): kind %s, want invalid or not_found", c.path, k)
		}
	}

	// Too large: refused with the size, nothing sent.
	_, err := sb.ReadWorkspaceFile(ctx, "/workspace/out/chart.png", 4)
	var tl *conch.FileTooLargeError
	if !errors.As(err, &tl) || tl.Size != 8 || tl.Limit != 4 || conch.KindOf(err) != conch.KindInvalid {
		t.Fatalf("over the limit: %v (%+v), want a FileTooLargeError of size 8, limit 4", err, tl)
	}

	// A device node (root only: mknod needs CAP_MKNOD).
	t.Run("device", func(t *testing.T) {
		if os.Geteuid() != 0 {
			testenv.Missing(t, "root", "mknod of a character device needs root")
		}
		// 1,3 is /dev/null.
		if err := syscall.Mknod(filepath.Join(ws, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			testenv.Missing(t, "mknod", err.Error())
		}
		_, err := sb.ReadWorkspaceFile(ctx, "/workspace/null", 1<<20)
		if err == nil || !strings.Contains(err.Error(), "character device") {
			t.Fatalf("device: %v, want a refusal naming a character device", err)
		}
	})
}

// TestReadWorkspaceFileSwap: a symbolic link to /etc/passwd swapped in and
// out of a checked path while it is read again and again: every read gets
// the regular file or a refusal, never the link's target.
func TestReadWorkspaceFileSwap(t *testing.T) {
	dir := t.TempDir()
	sb := sandboxdtest.HostSandbox(t, dir)
	ws := filepath.Join(dir, "workspace")
	if err := os.WriteFile(filepath.Join(ws, "good"), []byte("GOOD"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "realdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "realdir", "passwd"), []byte("GOOD"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(ws, "evildir")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(ws, "file")
	dirTarget := filepath.Join(ws, "dir")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// rename(2) swaps atomically: the name is always a regular file or
		// a link (to the file, or to a directory), never missing.
		for i := 0; !stop.Load(); i++ {
			tmp, dtmp := target+".tmp", dirTarget+".tmp"
			os.Remove(tmp)
			os.Remove(dtmp)
			if i%2 == 0 {
				os.Link(filepath.Join(ws, "good"), tmp)
				os.Symlink("realdir", dtmp)
			} else {
				os.Symlink("/etc/passwd", tmp)
				os.Symlink("/etc", dtmp)
			}
			os.Rename(tmp, target)
			os.Rename(dtmp, dirTarget)
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var ok, refused int
	for i := 0; i < 400; i++ {
		for _, p := range []string{"/workspace/file", "/workspace/dir/passwd"} {
			got, err := sb.ReadWorkspaceFile(ctx, p, 1<<20)
			switch {
			case err == nil && string(got) == "GOOD":
				ok++
			case err != nil && (strings.Contains(err.Error(), "symbolic link") || strings.Contains(err.Error(), "does not exist")):
				refused++
			default:
				stop.Store(true)
				wg.Wait()
				t.Fatalf("read %d of %s: %q, %v: want GOOD or a refusal", i, p, got, err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if refused == 0 {
		t.Fatalf("no read ever met the link (%d good): the swap did not race", ok)
	}
	t.Logf("%d reads of the regular file, %d refusals of the link", ok, refused)
}

// BenchmarkReadWorkspaceFile: what the link-free walk costs against a
// plain ReadFile of the same file (the baseline, in the same run), for a
// small picture and a 4 MB one, three directories deep.
func BenchmarkReadWorkspaceFile(b *testing.B) {
	dir := b.TempDir()
	sb := sandboxdtest.HostSandbox(b, dir)
	deep := filepath.Join(dir, "workspace", "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{16 << 10, 4 << 20} {
		name := filepath.Join(deep, "f"+strings.Repeat("x", size>>20))
		if err := os.WriteFile(name, make([]byte, size), 0o644); err != nil {
			b.Fatal(err)
		}
		p := "/workspace/a/b/c/" + filepath.Base(name)
		for _, m := range []struct {
			name string
			read func(ctx context.Context, p string, limit int64) ([]byte, error)
		}{{"ReadFile", sb.ReadFile}, {"ReadWorkspaceFile", sb.ReadWorkspaceFile}} {
			b.Run(m.name+"/"+strings.TrimSpace(humanBytes(size)), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					if got, err := m.read(context.Background(), p, 8<<20); err != nil || len(got) != size {
						b.Fatalf("%d bytes, %v", len(got), err)
					}
				}
			})
		}
	}
}

func humanBytes(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MB"
	}
	return strconv.Itoa(n>>10) + "KB"
}
