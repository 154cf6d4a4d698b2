package sandbox

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"conch/internal/flock"
)

// DefaultMirror is used when the apt sources name no Debian mirror.
const DefaultMirror = "http://deb.debian.org/debian"

// RootfsOptions configures the offline build of the image's root file system.
type RootfsOptions struct {
	// CacheDir keeps rootfs-<hash>.tar.gz between runs; required.
	CacheDir string
	// Mirror is the Debian mirror for debootstrap; "" means the one in the
	// host's apt sources (MirrorFromAptSources), else DefaultMirror.
	Mirror string
	// Debootstrap is the debootstrap binary; "" means looked up in PATH.
	Debootstrap string
	// Progress, if set, receives one line per build step.
	Progress func(string)
}

func (o RootfsOptions) report(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

// RootfsPath is where the cached root file system tarball of the current
// definition lives.
func RootfsPath(cacheDir string) string {
	return filepath.Join(cacheDir, "rootfs-"+Hash()+".tar.gz")
}

// CachedRootfs returns the path of a gzipped tar of the image's root file
// system, building it with debootstrap when the cache has none for the
// current definition. Concurrent callers (other processes included) wait for
// one build. It needs root.
func CachedRootfs(ctx context.Context, o RootfsOptions) (string, error) {
	if o.CacheDir == "" {
		return "", errors.New("build rootfs: no cache dir")
	}
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return "", fmt.Errorf("build rootfs: %w", err)
	}
	out := RootfsPath(o.CacheDir)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	unlock, err := flock.Lock(ctx, out+".lock")
	if err != nil {
		return "", fmt.Errorf("build rootfs: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(out); err == nil {
		return out, nil // built by another process while we waited
	}
	if err := buildRootfs(ctx, o, out); err != nil {
		return "", fmt.Errorf("build rootfs: %w", err)
	}
	return out, nil
}

func buildRootfs(ctx context.Context, o RootfsOptions, out string) (err error) {
	deboot := o.Debootstrap
	if deboot == "" {
		if deboot, err = exec.LookPath("debootstrap"); err != nil {
			return fmt.Errorf("debootstrap is not installed (apt-get install debootstrap): %w", err)
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("debootstrap needs root; build the image from images/sandbox/Containerfile instead")
	}
	mirror := o.Mirror
	if mirror == "" {
		mirror = MirrorFromAptSources("/etc/apt")
	}
	work, err := os.MkdirTemp(o.CacheDir, "rootfs-build-")
	if err != nil {
		return err
	}
	defer func() {
		unmountUnder(work)
		if rerr := os.RemoveAll(work); rerr != nil && err == nil {
			err = rerr
		}
	}()
	dir := filepath.Join(work, "root")

	start := time.Now()
	o.report("debootstrap %s from %s (about a minute)", Suite, mirror)
	cmd := exec.CommandContext(ctx, deboot, "--variant=minbase", "--include="+strings.Join(Packages, ","), Suite, dir, mirror)
	if err := runLogged(cmd, o); err != nil {
		return fmt.Errorf("debootstrap: %w", err)
	}
	o.report("debootstrap done in %s; running setup.sh", time.Since(start).Round(time.Second))
	cmd = exec.CommandContext(ctx, "chroot", dir, "/bin/sh", "-s")
	cmd.Stdin = bytes.NewReader(setupScript)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "LANG=C"}
	if err := runLogged(cmd, o); err != nil {
		return fmt.Errorf("setup.sh: %w", err)
	}
	unmountUnder(dir)

	o.report("writing %s", filepath.Base(out))
	tmp, err := os.CreateTemp(o.CacheDir, ".rootfs-*.tar.gz")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	zw, err := gzip.NewWriterLevel(tmp, gzip.BestSpeed)
	if err != nil {
		tmp.Close()
		return err
	}
	if err := WriteTar(ctx, zw, dir); err != nil {
		tmp.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return err
	}
	o.report("root file system ready in %s", time.Since(start).Round(time.Second))
	return nil
}

// milestones are the debootstrap lines worth a progress report.
var milestones = []string{
	"I: Retrieving Release", "I: Resolving dependencies of required", "I: Retrieving Packages",
	"I: Installing core packages", "I: Unpacking the base system", "I: Configuring the base system",
	"I: Base system installed",
}

// runLogged runs cmd, forwarding each output line to the progress reporter
// and keeping the tail for the error.
func runLogged(cmd *exec.Cmd, o RootfsOptions) error {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var tail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			tail = append(tail, line)
			if len(tail) > 20 {
				tail = tail[1:]
			}
			for _, m := range milestones {
				if strings.HasPrefix(line, m) {
					o.report("%s", line)
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("%w\n%s", err, strings.Join(tail, "\n"))
	}
	return nil
}

// MirrorFromAptSources returns the Debian mirror the host's apt uses for the
// main archive (not the security archive), read from sources.list and
// sources.list.d under aptDir; DefaultMirror when none is found.
func MirrorFromAptSources(aptDir string) string {
	files := []string{filepath.Join(aptDir, "sources.list")}
	more, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*"))
	files = append(files, more...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if m := mirrorIn(string(b)); m != "" {
			return m
		}
	}
	return DefaultMirror
}

// mirrorIn finds a mirror serving Suite in one sources file, in either the
// one-line or the deb822 format.
func mirrorIn(text string) string {
	// deb822: paragraphs separated by blank lines.
	for _, para := range strings.Split(text, "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(para, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if ok && !strings.Contains(k, " ") {
				fields[strings.ToLower(k)] = strings.TrimSpace(v)
			}
		}
		if fields["uris"] != "" && hasWord(fields["types"], "deb") && hasWord(fields["suites"], Suite) {
			return strings.Fields(fields["uris"])[0]
		}
	}
	// One-line: deb [options] URI suite components...
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) >= 2 && f[1] == Suite {
			return f[0]
		}
	}
	return ""
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// WriteTar writes the tree at dir as a tar stream, keeping owners, modes,
// symlinks and hard links. Device nodes, sockets and the contents of /dev,
// /proc and /sys are left out: the engine provides those.
func WriteTar(ctx context.Context, w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	type inode struct{ dev, ino uint64 }
	seen := map[inode]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		var link string
		if mode&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		hdr.Format = tar.FormatPAX
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st != nil {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
			if mode.IsRegular() && st.Nlink > 1 {
				key := inode{uint64(st.Dev), st.Ino}
				if first, ok := seen[key]; ok {
					hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				} else {
					seen[key] = hdr.Name
				}
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.IsDir() && (rel == "dev" || rel == "proc" || rel == "sys") {
			return fs.SkipDir
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write tar of %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write tar of %s: %w", dir, err)
	}
	return nil
}

// unmountUnder detaches every mount below dir (debootstrap mounts /proc and
// /sys in the target and leaves them when it is interrupted), so that the
// tree can be removed safely.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}
