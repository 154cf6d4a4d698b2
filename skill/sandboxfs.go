package skill

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"time"

	"conch"
)

// sandboxFS is a read-only fs.FS over a directory inside a sandbox, enough
// for Scan: ReadDir, Stat and small reads.
type sandboxFS struct {
	ctx  context.Context
	sb   conch.Sandbox
	root string
}

var (
	_ fs.ReadDirFS = (*sandboxFS)(nil)
	_ fs.StatFS    = (*sandboxFS)(nil)
)

func (s *sandboxFS) abs(name string) string {
	if name == "." {
		return s.root
	}
	return path.Join(s.root, name)
}

func (s *sandboxFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	infos, err := s.sb.ListFiles(s.ctx, s.abs(name))
	if err != nil {
		if conch.KindOf(err) == conch.KindNotFound || errors.Is(err, fs.ErrNotExist) {
			return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
		}
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	out := make([]fs.DirEntry, 0, len(infos))
	for _, fi := range infos {
		out = append(out, fs.FileInfoToDirEntry(fileInfo{fi}))
	}
	return out, nil
}

func (s *sandboxFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return fileInfo{conch.FileInfo{Name: ".", IsDir: true, Mode: fs.ModeDir | 0o755}}, nil
	}
	dir, base := path.Split(name)
	dir = path.Clean(dir)
	entries, err := s.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name() == base {
			return e.Info()
		}
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

func (s *sandboxFS) Open(name string) (fs.File, error) {
	info, err := s.Stat(name)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return &sandboxFile{info: info}, nil
	}
	data, err := s.sb.ReadFile(s.ctx, s.abs(name), MaxSkillFile+1)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &sandboxFile{info: info, r: bytes.NewReader(data)}, nil
}

type sandboxFile struct {
	info fs.FileInfo
	r    *bytes.Reader
}

func (f *sandboxFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *sandboxFile) Close() error               { return nil }
func (f *sandboxFile) Read(p []byte) (int, error) {
	if f.r == nil {
		return 0, io.EOF
	}
	return f.r.Read(p)
}

type fileInfo struct{ fi conch.FileInfo }

func (i fileInfo) Name() string { return i.fi.Name }
func (i fileInfo) Size() int64  { return i.fi.Size }
func (i fileInfo) Mode() fs.FileMode {
	if i.fi.IsDir {
		return i.fi.Mode | fs.ModeDir
	}
	return i.fi.Mode
}
func (i fileInfo) ModTime() time.Time { return i.fi.ModTime }
func (i fileInfo) IsDir() bool        { return i.fi.IsDir }
func (i fileInfo) Sys() any           { return nil }
