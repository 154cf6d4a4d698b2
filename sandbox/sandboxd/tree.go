package sandboxd

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// A tree is a directory conch copies into a sandbox whose engine cannot
// mount it (the skills of a Kubernetes pod): TreeHash names its content,
// PackTree streams it as a tar, and UnpackTree, run inside the pod by
// `conch sandbox-init --unpack`, makes a directory hold exactly it.
//
// Only regular files and directories below the top-level entries whose
// names do not start with a dot are part of a tree: the host side keeps
// its bookkeeping (fingerprints, locks, half-written copies) in dot names.

// MaxTreeBytes caps a tree's file contents (what UnpackTree accepts).
const MaxTreeBytes = 48 << 20

// treeHashFile, in an unpacked directory, holds the hash of what it holds.
const treeHashFile = ".conch-tree-hash"

type treeFile struct {
	rel  string // slash-separated, relative to the tree's root
	dir  bool
	mode fs.FileMode
	size int64
}

// listTree lists dir's tree, sorted; a missing dir is an empty tree.
func listTree(dir string) ([]treeFile, error) {
	var out []treeFile
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !strings.Contains(rel, "/") && strings.HasPrefix(rel, ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !e.IsDir() && !e.Type().IsRegular() {
			return nil // links and devices are not copied
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		out = append(out, treeFile{rel: rel, dir: e.IsDir(), mode: info.Mode().Perm(), size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out, nil
}

// TreeHash is a SHA-256 over dir's tree: every path, mode and content.
func TreeHash(dir string) (string, error) {
	files, err := listTree(dir)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", dir, err)
	}
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%t\x00%o\x00%d\x00", f.rel, f.dir, f.mode, f.size)
		if f.dir {
			continue
		}
		if err := hashFile(h, filepath.Join(dir, filepath.FromSlash(f.rel)), f.size); err != nil {
			return "", fmt.Errorf("hash %s: %w", dir, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(w io.Writer, name string, size int64) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, io.LimitReader(f, size))
	return err
}

// PackTree writes dir's tree to w as a tar stream.
func PackTree(dir string, w io.Writer) error {
	files, err := listTree(dir)
	if err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	tw := tar.NewWriter(w)
	for _, f := range files {
		hdr := &tar.Header{Name: f.rel, Mode: int64(f.mode), Format: tar.FormatPAX}
		if f.dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, f.rel+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, f.size
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if err := copyFile(tw, filepath.Join(dir, filepath.FromSlash(f.rel)), f.size); err != nil {
			return fmt.Errorf("pack %s: %w", f.rel, err)
		}
	}
	return tw.Close()
}

// copyFile writes exactly size bytes of name (a file that changed size
// since it was listed is an error, not a corrupt archive).
func copyFile(w io.Writer, name string, size int64) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err == nil && n != size {
		err = fmt.Errorf("changed while copied (%d of %d bytes)", n, size)
	}
	return err
}

// UnpackTree makes dir hold exactly the tree read from r (a PackTree
// stream) and records hash. When dir already records hash, r is drained
// and nothing changes (false). Each top-level entry is replaced by a
// rename, so a reader sees a whole old or a whole new entry; entries the
// tree no longer has are removed.
func UnpackTree(dir, hash string, r io.Reader) (changed bool, err error) {
	if hash == "" || strings.ContainsAny(hash, "/\x00\n") {
		return false, errors.New("unpack: a hash is required")
	}
	if cur, err := os.ReadFile(filepath.Join(dir, treeHashFile)); err == nil && string(cur) == hash {
		_, err := io.Copy(io.Discard, r)
		return false, err
	}
	tmp, err := os.MkdirTemp(dir, ".tmp-")
	if err != nil {
		return false, fmt.Errorf("unpack: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := extract(tmp, r); err != nil {
		return false, fmt.Errorf("unpack: %w", err)
	}
	old, err := os.MkdirTemp(dir, ".old-")
	if err != nil {
		return false, fmt.Errorf("unpack: %w", err)
	}
	defer os.RemoveAll(old)
	have, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("unpack: %w", err)
	}
	for _, e := range have {
		n := e.Name()
		if strings.HasPrefix(n, ".") {
			continue
		}
		if _, err := os.Lstat(filepath.Join(tmp, n)); errors.Is(err, fs.ErrNotExist) {
			if err := os.Rename(filepath.Join(dir, n), filepath.Join(old, n)); err != nil {
				return false, fmt.Errorf("unpack: %w", err)
			}
		}
	}
	want, err := os.ReadDir(tmp)
	if err != nil {
		return false, fmt.Errorf("unpack: %w", err)
	}
	for _, e := range want {
		n := e.Name()
		dst := filepath.Join(dir, n)
		if _, err := os.Lstat(dst); err == nil {
			if err := os.Rename(dst, filepath.Join(old, n)); err != nil {
				return false, fmt.Errorf("unpack: %w", err)
			}
		}
		if err := os.Rename(filepath.Join(tmp, n), dst); err != nil {
			return false, fmt.Errorf("unpack: %w", err)
		}
	}
	hf, err := os.CreateTemp(dir, ".tmp-hash-")
	if err != nil {
		return false, fmt.Errorf("unpack: %w", err)
	}
	_, err = hf.WriteString(hash)
	err = errors.Join(err, hf.Close())
	if err == nil {
		err = os.Rename(hf.Name(), filepath.Join(dir, treeHashFile))
	}
	if err != nil {
		_ = os.Remove(hf.Name())
		return false, fmt.Errorf("unpack: %w", err)
	}
	return true, nil
}

// extract writes a tar stream of directories and regular files under dst,
// refusing any other entry, a path leaving dst, a top-level dot name, and
// more than MaxTreeBytes of content.
func extract(dst string, r io.Reader) error {
	tr := tar.NewReader(r)
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if !fs.ValidPath(name) || name == "." || path.Clean(name) != name {
			return fmt.Errorf("entry %q: not a clean relative path", hdr.Name)
		}
		if top, _, _ := strings.Cut(name, "/"); strings.HasPrefix(top, ".") {
			return fmt.Errorf("entry %q: a top-level dot name", hdr.Name)
		}
		p := filepath.Join(dst, filepath.FromSlash(name))
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(p, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			total += hdr.Size
			if hdr.Size < 0 || total > MaxTreeBytes {
				return fmt.Errorf("more than %d bytes", MaxTreeBytes)
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			n, err := io.Copy(f, tr)
			err = errors.Join(err, f.Chmod(mode), f.Close())
			if err != nil {
				return err
			}
			if n != hdr.Size {
				return fmt.Errorf("entry %q: %d of %d bytes", hdr.Name, n, hdr.Size)
			}
		default:
			return fmt.Errorf("entry %q: only directories and regular files", hdr.Name)
		}
	}
}
