package spool

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"conch"
)

func open(b []byte) func(context.Context) (io.ReadCloser, error) {
	return func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

func TestPutOpenDelete(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: "a/../b"}
	ref, n, err := s.Put(ctx, key, conch.Attachment{Name: "x.txt", Open: open([]byte("hello"))}, 100)
	if err != nil || n != 5 {
		t.Fatalf("Put: %q %d %v", ref, n, err)
	}
	r, err := s.Open(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "hello" {
		t.Fatalf("got %q, want hello", b)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, ref); conch.KindOf(err) != conch.KindNotFound {
		t.Fatalf("after Delete: got %v, want not found", err)
	}
}

func TestPutRefusesTooLargeAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s, _ := New(dir)
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: "c"}
	_, _, err := s.Put(t.Context(), key, conch.Attachment{Name: "big", Open: open(bytes.Repeat([]byte("x"), 101))}, 100)
	if conch.KindOf(err) != conch.KindInvalid {
		t.Fatalf("got %v, want KindInvalid", err)
	}
	_, _, err = s.Put(t.Context(), key, conch.Attachment{Name: "big", Size: 1000, Open: open(nil)}, 100)
	if conch.KindOf(err) != conch.KindInvalid {
		t.Fatalf("declared size: got %v, want KindInvalid", err)
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, _ error) error {
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Fatalf("left behind: %v", files)
	}
}

func TestOpenRefusesPathsOutsideTheSpool(t *testing.T) {
	s, _ := New(t.TempDir())
	for _, ref := range []string{"../etc/passwd", "ab/../../x", "/etc/passwd", "ab", "ab/cd/ef", "AB/cd"} {
		if _, err := s.Open(t.Context(), ref); err == nil || !strings.Contains(err.Error(), "bad spool reference") {
			t.Errorf("Open(%q): got %v, want a refusal", ref, err)
		}
	}
}
