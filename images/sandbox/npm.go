package sandbox

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"conch/internal/flock"
)

// FetchOptions says where tarballs come from and are kept.
type FetchOptions struct {
	// Registry is the npm registry's base URL; "" means DefaultRegistry.
	Registry string
	// CacheDir keeps the downloads (under npm/); required.
	CacheDir string
	// Progress, if set, receives download progress lines (at most one per
	// ProgressEvery per tarball, plus one when it is done).
	Progress func(string)
	// ProgressEvery; 0 means 2 s.
	ProgressEvery time.Duration
	// Client; nil means a client without an overall timeout (the downloads
	// are hundreds of MB; ctx bounds them).
	Client *http.Client
}

// ErrIntegrity is returned (wrapped) when a tarball does not match its pin.
var ErrIntegrity = errors.New("integrity mismatch")

// TarballPath is where t is kept in the download cache.
func TarballPath(cacheDir string, t Tarball) string {
	return filepath.Join(cacheDir, "npm", t.FileName())
}

// FetchTarball returns the path of t in the download cache, downloading it
// when missing. A cached file is verified against the pin on every use (and
// downloaded again when it does not match); a download that does not match
// is an error wrapping ErrIntegrity and is not kept. Concurrent callers,
// other processes included, wait for one download.
func FetchTarball(ctx context.Context, o FetchOptions, t Tarball) (string, error) {
	if o.CacheDir == "" {
		return "", errors.New("fetch tarball: no cache dir")
	}
	want, err := t.SHA512()
	if err != nil {
		return "", fmt.Errorf("fetch tarball: %w", err)
	}
	out := TarballPath(o.CacheDir, t)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("fetch tarball: %w", err)
	}
	unlock, err := flock.Lock(ctx, out+".lock")
	if err != nil {
		return "", fmt.Errorf("fetch tarball: %w", err)
	}
	defer unlock()
	if got, err := fileSHA512(out); err == nil {
		if got == want {
			return out, nil
		}
		report(o.Progress, fmt.Sprintf("cached %s@%s does not match its pin; downloading it again", t.Package, t.Version))
		_ = os.Remove(out)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("fetch tarball: %w", err)
	}
	if err := download(ctx, o, t, want, out); err != nil {
		return "", fmt.Errorf("fetch %s@%s: %w", t.Package, t.Version, err)
	}
	return out, nil
}

func download(ctx context.Context, o FetchOptions, t Tarball, wantHex, out string) error {
	registry := o.Registry
	if registry == "" {
		registry = DefaultRegistry
	}
	url := t.URL(registry)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	hc := o.Client
	if hc == nil {
		hc = &http.Client{}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".download-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	every := o.ProgressEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	h := sha512.New()
	pw := &progressWriter{name: t.Package + "@" + t.Version, total: resp.ContentLength, every: every, report: o.Progress, last: time.Now()}
	start := time.Now()
	if _, err := io.Copy(io.MultiWriter(tmp, h, pw), resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != wantHex {
		gotB64 := base64.StdEncoding.EncodeToString(h.Sum(nil))
		return fmt.Errorf("%w: %s has sha512-%s, the pin says %s (a registry or proxy served other bytes; nothing was kept)",
			ErrIntegrity, url, gotB64, t.Integrity)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return err
	}
	report(o.Progress, fmt.Sprintf("downloaded %s (%s in %s)", pw.name, humanBytes(pw.n), time.Since(start).Round(100*time.Millisecond)))
	return nil
}

type progressWriter struct {
	name   string
	n      int64
	total  int64
	every  time.Duration
	last   time.Time
	report func(string)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	if p.report != nil && time.Since(p.last) >= p.every {
		p.last = time.Now()
		if p.total > 0 {
			p.report(fmt.Sprintf("downloading %s: %s of %s (%d%%)", p.name, humanBytes(p.n), humanBytes(p.total), p.n*100/p.total))
		} else {
			p.report(fmt.Sprintf("downloading %s: %s", p.name, humanBytes(p.n)))
		}
	}
	return len(b), nil
}

func fileSHA512(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha512.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func report(progress func(string), s string) {
	if progress != nil {
		progress(s)
	}
}

// FetchAgents fetches every tarball of as and returns their cached paths by
// Tarball.Dir.
func FetchAgents(ctx context.Context, o FetchOptions, as []Agent) (map[string]string, error) {
	paths := map[string]string{}
	for _, t := range AgentTarballs(as) {
		p, err := FetchTarball(ctx, o, t)
		if err != nil {
			return nil, err
		}
		paths[t.Dir] = p
	}
	return paths, nil
}

// WriteAgentsTar writes the layer that adds as to an image, for extraction
// at "/": AgentsDir/<dir>/… from each tarball (its From directory, less
// Skip) and BinDir/<name> for each agent. Everything is owned by root,
// directories 0755, files readable by all and executable by all where the
// package has them executable. paths maps Tarball.Dir to the cached file.
func WriteAgentsTar(ctx context.Context, w io.Writer, as []Agent, paths map[string]string) error {
	tw := tar.NewWriter(w)
	mtime := time.Unix(0, 0)
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX})
	}
	if err := dir(strings.TrimPrefix(AgentsDir, "/")); err != nil {
		return fmt.Errorf("agents layer: %w", err)
	}
	for _, t := range AgentTarballs(as) {
		p, ok := paths[t.Dir]
		if !ok {
			return fmt.Errorf("agents layer: %s@%s was not fetched", t.Package, t.Version)
		}
		if err := copyTarball(ctx, tw, t, p, strings.TrimPrefix(AgentsDir, "/")+"/"+t.Dir, dir); err != nil {
			return fmt.Errorf("agents layer: %s@%s: %w", t.Package, t.Version, err)
		}
	}
	made := map[string]bool{}
	for _, a := range as {
		for _, f := range a.Files {
			if !path.IsAbs(f.Path) {
				return fmt.Errorf("agents layer: %s: file path %q is not absolute", a.Name, f.Path)
			}
			var parents []string
			for d := path.Dir(f.Path); d != "/" && !made[d]; d = path.Dir(d) {
				parents = append(parents, d)
			}
			for i := len(parents) - 1; i >= 0; i-- {
				made[parents[i]] = true
				if err := dir(strings.TrimPrefix(parents[i], "/")); err != nil {
					return fmt.Errorf("agents layer: %w", err)
				}
			}
			err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: 0o644, Size: int64(len(f.Content)), ModTime: mtime, Format: tar.FormatPAX})
			if err == nil {
				_, err = io.WriteString(tw, f.Content)
			}
			if err != nil {
				return fmt.Errorf("agents layer: %s: %w", f.Path, err)
			}
		}
	}
	for _, a := range as {
		name := strings.TrimPrefix(BinDir, "/") + "/" + a.Name
		var err error
		if a.Link != "" {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: a.Link, Mode: 0o777, ModTime: mtime, Format: tar.FormatPAX})
		} else {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(a.Wrapper)), ModTime: mtime, Format: tar.FormatPAX})
			if err == nil {
				_, err = io.WriteString(tw, a.Wrapper)
			}
		}
		if err != nil {
			return fmt.Errorf("agents layer: %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("agents layer: %w", err)
	}
	return nil
}

// copyTarball copies the entries of the gzipped tarball at p that lie
// under t.From (less t.Skip) into tw under dest.
func copyTarball(ctx context.Context, tw *tar.Writer, t Tarball, p, dest string, mkdir func(string) error) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	made := map[string]bool{}
	var ensure func(d string) error
	ensure = func(d string) error {
		if made[d] || !strings.HasPrefix(d, dest+"/") {
			return nil
		}
		if err := ensure(path.Dir(d)); err != nil {
			return err
		}
		made[d] = true
		return mkdir(d)
	}
	if err := mkdir(dest); err != nil {
		return err
	}
	made[dest] = true
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		clean := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if clean == ".." || strings.HasPrefix(clean, "../") || path.IsAbs(clean) {
			return fmt.Errorf("entry %q leaves the package", h.Name)
		}
		rel, ok := strings.CutPrefix(clean, strings.TrimSuffix(t.From, "/")+"/")
		if !ok || rel == "" {
			continue
		}
		if skipped(rel, t.Skip) {
			continue
		}
		name := dest + "/" + rel
		switch h.Typeflag {
		case tar.TypeDir:
			if err := ensure(name); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := ensure(path.Dir(name)); err != nil {
				return err
			}
			mode := int64(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: h.Size, ModTime: h.ModTime, Format: tar.FormatPAX}); err != nil {
				return err
			}
			if _, err := io.Copy(tw, tr); err != nil {
				return err
			}
			n++
		case tar.TypeSymlink:
			if path.IsAbs(h.Linkname) || strings.HasPrefix(path.Clean(path.Join(path.Dir(rel), h.Linkname)), "../") {
				return fmt.Errorf("symlink %q points outside the package", h.Name)
			}
			if err := ensure(path.Dir(name)); err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: h.Linkname, Mode: 0o777, ModTime: h.ModTime, Format: tar.FormatPAX}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q has unsupported type %q", h.Name, h.Typeflag)
		}
	}
	if n == 0 {
		return fmt.Errorf("no files under %s", t.From)
	}
	return nil
}

func skipped(rel string, skip []string) bool {
	for _, s := range skip {
		if rel == strings.TrimSuffix(s, "/") || (strings.HasSuffix(s, "/") && strings.HasPrefix(rel, s)) {
			return true
		}
	}
	return false
}
