// Package spool keeps received files on the host's disk until their turn
// copies them into the conversation's workspace: conch.AttachmentStore over
// a directory, one subdirectory per conversation. A file is written to a
// temporary name, synced and renamed, so a stored reference always names a
// whole file, even after a crash.
package spool

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"conch"
)

// Spool is a directory of received files.
type Spool struct {
	dir string
}

var (
	_ conch.AttachmentStore   = (*Spool)(nil)
	_ conch.ConversationFiles = (*Spool)(nil)
)

// New returns a spool in dir, creating it (0700: the files are the user's).
func New(dir string) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool %s: %w", dir, err)
	}
	return &Spool{dir: dir}, nil
}

// convDir names a conversation's directory: a hash, since keys hold any text.
func convDir(key conch.ConversationKey) string {
	h := sha256.Sum256([]byte(key.String()))
	return hex.EncodeToString(h[:8])
}

// Put implements conch.AttachmentStore. The reference is "<conv>/<random>".
func (s *Spool) Put(ctx context.Context, key conch.ConversationKey, a conch.Attachment, limit int64) (string, int64, error) {
	if a.Open == nil {
		return "", 0, conch.Errorf(conch.KindInvalid, "file %q has no content", a.Name)
	}
	if limit > 0 && a.Size > limit {
		return "", 0, conch.Errorf(conch.KindInvalid, "file %q is %d bytes, more than the limit of %d", a.Name, a.Size, limit)
	}
	r, err := a.Open(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("open %q: %w", a.Name, err)
	}
	defer r.Close()
	dir := filepath.Join(s.dir, convDir(key))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", 0, fmt.Errorf("spool: %w", err)
	}
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", 0, fmt.Errorf("spool: %w", err)
	}
	name := hex.EncodeToString(rnd[:])
	tmp, err := os.CreateTemp(dir, ".put-*")
	if err != nil {
		return "", 0, fmt.Errorf("spool: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename it no longer exists
	src := io.Reader(ctxReader{ctx, r})
	if limit > 0 {
		src = io.LimitReader(src, limit+1)
	}
	n, err := io.Copy(tmp, src)
	if err == nil && limit > 0 && n > limit {
		err = conch.Errorf(conch.KindInvalid, "file %q is more than the limit of %d bytes", a.Name, limit)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if errors.Is(err, syscall.ENOSPC) {
		return "", 0, &conch.Error{Kind: conch.KindUnavailable, User: "disk full at " + s.dir, Err: err}
	}
	if err != nil {
		return "", 0, fmt.Errorf("spool %q: %w", a.Name, err)
	}
	return convDir(key) + "/" + name, n, nil
}

// Open implements conch.AttachmentStore.
func (s *Spool) Open(_ context.Context, ref string) (io.ReadCloser, error) {
	p, err := s.path(ref)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &conch.Error{Kind: conch.KindNotFound, User: "the received file is no longer kept", Err: err}
	}
	return f, err
}

// OpenFile implements conch.ConversationFiles: a reference of another
// conversation is not found.
func (s *Spool) OpenFile(ctx context.Context, key conch.ConversationKey, ref string) (io.ReadCloser, error) {
	if conv, _, _ := strings.Cut(ref, "/"); conv != convDir(key) {
		return nil, conch.Errorf(conch.KindNotFound, "no such file in this conversation")
	}
	return s.Open(ctx, ref)
}

// Delete implements conch.AttachmentStore.
func (s *Spool) Delete(_ context.Context, key conch.ConversationKey) error {
	if err := os.RemoveAll(filepath.Join(s.dir, convDir(key))); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}

// path checks a reference (it comes from the store, but a path must never
// leave the spool) and returns its file.
func (s *Spool) path(ref string) (string, error) {
	conv, name, ok := strings.Cut(ref, "/")
	if !ok || !isHex(conv) || !isHex(name) {
		return "", conch.Errorf(conch.KindInvalid, "bad spool reference %q", ref)
	}
	return filepath.Join(s.dir, conv, name), nil
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
