//go:build kubernetes

package kubernetes

import (
	"context"
	"errors"
	"io/fs"

	"conch"
	"conch/sandbox/sandboxd"
)

// podSandbox is the conch.Sandbox handed out: every call goes to the
// conversation's current pod (recreated if it went) over its agent stream,
// so a holder survives Release, a new pod and a conch-side reconnect.
type podSandbox struct {
	r   *Runtime
	key conch.ConversationKey
	id  string
}

var (
	_ conch.Sandbox         = (*podSandbox)(nil)
	_ conch.WorkspaceReader = (*podSandbox)(nil)
)

// ID is the pod's uid when it was handed out.
func (s *podSandbox) ID() string { return s.id }

// do runs op on the conversation's agent. After an error the pod is looked
// at again on the next call (it may be gone, and is then recreated); an op
// that found no agent at all (nothing of it was sent: the pod went since it
// was last seen) is tried once more on the pod as the API server has it now.
func (s *podSandbox) do(ctx context.Context, op func(*sandboxd.Client) error) error {
	b := s.r.boxFor(s.key)
	s.r.touch(b, 1)
	defer s.r.touch(b, -1)
	for attempt := 0; ; attempt++ {
		c, err := s.client(ctx)
		if err != nil {
			return err
		}
		err = op(c)
		if err == nil {
			return nil
		}
		s.r.forget(s.key)
		if attempt > 0 || !errors.Is(err, sandboxd.ErrConnect) {
			return err
		}
	}
}

func (s *podSandbox) client(ctx context.Context) (*sandboxd.Client, error) {
	if err := s.r.checkOpen(); err != nil {
		return nil, err
	}
	b, err := s.r.lockBox(ctx, s.key)
	if err != nil {
		return nil, err
	}
	defer b.unlock()
	if err := s.r.ensureLocked(ctx, b); err != nil {
		return nil, err
	}
	s.r.mu.Lock()
	b.lastUse = s.r.opts.Now()
	s.r.mu.Unlock()
	return b.client, nil
}

func (s *podSandbox) Exec(ctx context.Context, req conch.ExecRequest) (conch.ExecResult, error) {
	var res conch.ExecResult
	err := s.do(ctx, func(c *sandboxd.Client) (err error) {
		res, err = c.Exec(ctx, req)
		return err
	})
	return res, err
}

func (s *podSandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	var b []byte
	err := s.do(ctx, func(c *sandboxd.Client) (err error) {
		b, err = c.ReadFile(ctx, path, limit)
		return err
	})
	return b, err
}

func (s *podSandbox) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	return s.do(ctx, func(c *sandboxd.Client) error { return c.WriteFile(ctx, path, data, mode) })
}

func (s *podSandbox) ListFiles(ctx context.Context, path string) ([]conch.FileInfo, error) {
	var fs []conch.FileInfo
	err := s.do(ctx, func(c *sandboxd.Client) (err error) {
		fs, err = c.ListFiles(ctx, path)
		return err
	})
	return fs, err
}

// ReadWorkspaceFile implements conch.WorkspaceReader through the agent (no
// link followed, regular files only): send_file works as on Docker.
func (s *podSandbox) ReadWorkspaceFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	var b []byte
	err := s.do(ctx, func(c *sandboxd.Client) (err error) {
		b, err = c.ReadWorkspaceFile(ctx, path, limit)
		return err
	})
	return b, err
}
