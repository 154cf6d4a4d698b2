package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"conch"
	"conch/internal/flock"
)

// registry records what container labels cannot: which conversation a warm
// pool container was assigned to (labels are immutable, so the assignment
// lives in the container's new name and here) and which volume holds that
// conversation's workspace. It is a small JSON file, written atomically.
type registry struct {
	path string
	mu   sync.Mutex
	m    map[string]regEntry // by container name
}

type regEntry struct {
	Conversation string    `json:"conversation"`
	Volume       string    `json:"volume"`
	Assigned     time.Time `json:"assigned"`
}

type regFile struct {
	Version     int                 `json:"version"`
	Assignments map[string]regEntry `json:"assignments"`
}

func openRegistry(path string) (*registry, error) {
	r := &registry{path: path, m: map[string]regEntry{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return r, nil
	case err != nil:
		return nil, fmt.Errorf("open sandbox registry: %w", err)
	}
	var f regFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("open sandbox registry %s: %w (move it aside to start afresh)", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("open sandbox registry %s: unknown version %d", path, f.Version)
	}
	for k, v := range f.Assignments {
		r.m[k] = v
	}
	return r, nil
}

// get returns the assignment of a container name.
func (r *registry) get(name string) (regEntry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[name]
	return e, ok
}

// volumeOf returns the recorded workspace volume of a conversation.
func (r *registry) volumeOf(key conch.ConversationKey) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.m {
		if e.Conversation == key.String() {
			return e.Volume, true
		}
	}
	return "", false
}

// containerOfVolume returns the container name whose workspace is vol, or "".
func (r *registry) containerOfVolume(vol string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, e := range r.m {
		if e.Volume == vol {
			return name
		}
	}
	return ""
}

func (r *registry) put(name string, e regEntry) error {
	return r.update(func(m map[string]regEntry) bool { m[name] = e; return true })
}

func (r *registry) delete(name string) error {
	return r.update(func(m map[string]regEntry) bool {
		if _, ok := m[name]; !ok {
			return false
		}
		delete(m, name)
		return true
	})
}

// update changes the registry under a file lock, on what the file holds now:
// another conch process (`conch sandbox` beside `conch up`) may have written
// it since this one read it, and its changes must not be lost.
func (r *registry) update(change func(map[string]regEntry) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unlock, err := flock.Lock(ctx, r.path+".lock")
	if err != nil {
		return fmt.Errorf("save sandbox registry: %w", err)
	}
	defer unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.reloadLocked(); err != nil {
		return err
	}
	if !change(r.m) {
		return nil
	}
	return r.saveLocked()
}

// reloadLocked replaces the in-memory map with the file's content.
func (r *registry) reloadLocked() error {
	fresh, err := openRegistry(r.path)
	if err != nil {
		return err
	}
	r.m = fresh.m
	return nil
}

func (r *registry) saveLocked() error {
	b, err := json.MarshalIndent(regFile{Version: 1, Assignments: r.m}, "", "  ")
	if err != nil {
		return fmt.Errorf("save sandbox registry: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(r.path), 0o700); err != nil {
		return fmt.Errorf("save sandbox registry: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.path), ".sandboxes-*.json")
	if err != nil {
		return fmt.Errorf("save sandbox registry: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("save sandbox registry: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save sandbox registry: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save sandbox registry: %w", err)
	}
	if err := os.Rename(tmp.Name(), r.path); err != nil {
		return fmt.Errorf("save sandbox registry: %w", err)
	}
	return nil
}
