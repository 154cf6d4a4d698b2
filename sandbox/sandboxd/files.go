package sandboxd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

func (c *sconn) readFile(st *sstream, req request) (result, error) {
	name, p, err := c.srv.resolve(req.Path)
	if err != nil {
		return result{}, err
	}
	f, err := os.Open(p)
	if err != nil {
		return result{}, pathError(name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return result{}, pathError(name, err)
	}
	if fi.IsDir() {
		return result{}, invalidf("%s is a directory; list it instead", name)
	}
	if !fi.Mode().IsRegular() {
		return result{}, invalidf("%s is not a regular file", name)
	}
	var r io.Reader = f
	if req.Limit > 0 {
		r = io.LimitReader(f, req.Limit)
	}
	if _, err := c.sendReader(st, r); err != nil {
		return result{}, fmt.Errorf("read %s: %w", name, err)
	}
	return result{Size: fi.Size()}, nil
}

// writeFile writes the stream's data to a temp file beside the target and
// renames it into place, so readers see the old or the new file, never half.
// Missing parent directories are created.
func (c *sconn) writeFile(st *sstream, req request) (result, error) {
	name, p, err := c.srv.resolve(req.Path)
	if err != nil {
		return result{}, err
	}
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return result{}, invalidf("%s is a directory", name)
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{}, pathError(name, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".conch-*")
	if err != nil {
		return result{}, pathError(name, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	var total int64
	for {
		b, err := st.in.pop(st.ctx)
		if errors.Is(err, errEnd) {
			break
		}
		if err != nil {
			return result{}, fmt.Errorf("write %s: %w", name, err)
		}
		if _, err := tmp.Write(b); err != nil {
			return result{}, pathError(name, err)
		}
		total += int64(len(b))
		if err := c.fw.window(st.id, len(b)); err != nil {
			return result{}, err
		}
	}
	mode := fs.FileMode(req.Mode) & fs.ModePerm
	if mode == 0 {
		mode = 0o644
	}
	if err := tmp.Chmod(mode); err != nil {
		return result{}, pathError(name, err)
	}
	if err := tmp.Sync(); err != nil {
		return result{}, pathError(name, err)
	}
	if err := tmp.Close(); err != nil {
		return result{}, pathError(name, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return result{}, pathError(name, err)
	}
	done = true
	return result{Size: total}, nil
}

func (c *sconn) list(st *sstream, req request) (result, error) {
	name, p, err := c.srv.resolve(req.Path)
	if err != nil {
		return result{}, err
	}
	des, err := os.ReadDir(p)
	if err != nil {
		return result{}, pathError(name, err)
	}
	entries := make([]wireEntry, 0, len(des))
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			continue // removed while listing
		}
		entries = append(entries, wireEntry{
			Name:    de.Name(),
			Size:    fi.Size(),
			Mode:    uint32(fi.Mode()),
			ModTime: fi.ModTime().UnixNano(),
			IsDir:   fi.IsDir(),
		})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	b, err := json.Marshal(entries)
	if err != nil {
		return result{}, fmt.Errorf("list %s: %w", name, err)
	}
	if err := c.sendBytes(st, b); err != nil {
		return result{}, fmt.Errorf("list %s: %w", name, err)
	}
	return result{Size: int64(len(entries))}, nil
}

// pathError rewrites an fs error to name the sandbox path, not the host one.
func pathError(sandboxPath string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		we := newWireError(pe.Err)
		switch we.Code {
		case codeNotFound:
			we.Message = fmt.Sprintf("%s does not exist", sandboxPath)
		case codePermission:
			we.Message = fmt.Sprintf("permission denied: %s", sandboxPath)
		default:
			we.Message = fmt.Sprintf("%s %s: %v", pe.Op, sandboxPath, pe.Err)
		}
		return we
	}
	return newWireError(err)
}

// statfs reports the size and use of the file system holding req.Path.
func (c *sconn) statfs(req request) (result, error) {
	name, p, err := c.srv.resolve(req.Path)
	if err != nil {
		return result{}, err
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(p, &fs); err != nil {
		return result{}, pathError(name, err)
	}
	bs := int64(fs.Bsize)
	return result{FSBytes: int64(fs.Blocks) * bs, FSUsed: int64(fs.Blocks-fs.Bfree) * bs}, nil
}
