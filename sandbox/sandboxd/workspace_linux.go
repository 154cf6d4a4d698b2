package sandboxd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// readWorkspace reads a regular file under the workspace for a file that
// leaves the sandbox (send_file). Nothing is checked and then opened: every
// directory of the path is opened relative to the one before with
// O_NOFOLLOW, and the file itself with O_NOFOLLOW|O_NONBLOCK, so a symbolic
// link anywhere in the path is refused even when it was swapped in a moment
// ago, a FIFO cannot block the read, and what is read is what was checked
// (fstat of the open file). ".." is refused outright.
func (c *sconn) readWorkspace(st *sstream, req request) (result, error) {
	name, rel, err := c.srv.workspaceRel(req.Path)
	if err != nil {
		return result{}, err
	}
	root := c.srv.workspace()
	if c.srv.Root != "" {
		root = filepath.Join(c.srv.Root, filepath.FromSlash(root))
	}
	f, err := openBeneath(root, rel, name)
	if err != nil {
		return result{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return result{}, pathError(name, err)
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		return result{}, invalidf("%s is a directory; only regular files can be sent", name)
	case !m.IsRegular():
		return result{}, invalidf("%s is not a regular file (%s); only regular files can be sent", name, kindOf(m))
	}
	if req.Limit > 0 && fi.Size() > req.Limit {
		return result{}, tooLarge(name, fi.Size(), req.Limit)
	}
	r := io.Reader(f)
	if req.Limit > 0 {
		// The file may grow while it is read: never send past the limit.
		r = &capReader{r: f, left: req.Limit, name: name, limit: req.Limit}
	}
	n, err := c.sendReader(st, r)
	if err != nil {
		var we *wireError
		if errors.As(err, &we) {
			return result{}, we
		}
		return result{}, fmt.Errorf("read %s: %w", name, err)
	}
	return result{Size: n}, nil
}

// workspaceRel checks a path for readWorkspace and returns it absolute and
// relative to the workspace.
func (s *Server) workspaceRel(p string) (abs, rel string, err error) {
	if p == "" {
		return "", "", invalidf("empty path")
	}
	if err := checkNUL("path", p); err != nil {
		return "", "", err
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", "", invalidf("%s: paths with \"..\" are refused; name the file under %s directly", p, s.workspace())
		}
	}
	ws := s.workspace()
	if !path.IsAbs(p) {
		p = path.Join(ws, p)
	}
	abs = path.Clean(p)
	rel, ok := strings.CutPrefix(abs, ws+"/")
	if !ok {
		if abs == ws {
			return "", "", invalidf("%s is a directory; only regular files can be sent", abs)
		}
		return "", "", invalidf("%s is outside %s; only files under %s can be sent", abs, ws, ws)
	}
	return abs, rel, nil
}

// openBeneath opens root/rel without following a symbolic link in rel.
func openBeneath(root, rel, name string) (*os.File, error) {
	dfd, err := syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathError(name, &os.PathError{Op: "open", Path: root, Err: err})
	}
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		last := i == len(parts)-1
		flags := syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
		if last {
			flags |= syscall.O_NONBLOCK | syscall.O_NOCTTY
		} else {
			flags |= syscall.O_DIRECTORY
		}
		fd, err := openat(dfd, part, flags)
		if err != nil {
			werr := refusal(filepath.Join(root, filepath.Join(parts[:i+1]...)), name, path.Join(parts[:i+1]...), last, err)
			syscall.Close(dfd)
			return nil, werr
		}
		syscall.Close(dfd)
		dfd = fd
	}
	return os.NewFile(uintptr(dfd), name), nil
}

// openat retries on EINTR (a FIFO or a slow file system).
func openat(dfd int, name string, flags int) (int, error) {
	for {
		fd, err := syscall.Openat(dfd, name, flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// refusal words a failed open of one component; it looks at what is
// there only to say so (the decision was the open's).
func refusal(host, name, sub string, last bool, err error) error {
	if fi, serr := os.Lstat(host); serr == nil && fi.Mode()&os.ModeSymlink != 0 {
		if last {
			return invalidf("%s is a symbolic link; links are never followed, send the file it points to by its own path under /workspace", name)
		}
		return invalidf("%s: /workspace/%s is a symbolic link; links are never followed", name, sub)
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return invalidf("%s: /workspace/%s is not a directory", name, sub)
	}
	if errors.Is(err, syscall.ELOOP) {
		return invalidf("%s is a symbolic link; links are never followed", name)
	}
	return pathError(name, &os.PathError{Op: "open", Path: sub, Err: err})
}

func kindOf(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return m.Type().String()
}

// tooLarge is the refusal of a file over the caller's limit, with its size.
func tooLarge(name string, size, limit int64) *wireError {
	return &wireError{Code: codeTooLarge, Size: size,
		Message: fmt.Sprintf("%s is %d bytes, over the limit of %d bytes", name, size, limit)}
}

// capReader fails once more than limit bytes were read.
type capReader struct {
	r           io.Reader
	left, limit int64
	name        string
	read        int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, tooLarge(c.name, c.read+1, c.limit)
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	c.read += int64(n)
	return n, err
}
