//go:build kubernetes

package kubernetes

import (
	"context"
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

var _ conch.Sandbox = (*podSandbox)(nil)

// ID is the pod's uid when it was handed out.
func (s *podSandbox) ID() string { return s.id }

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
	c, err := s.client(ctx)
	if err != nil {
		return conch.ExecResult{}, err
	}
	return c.Exec(ctx, req)
}

func (s *podSandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	c, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.ReadFile(ctx, path, limit)
}

func (s *podSandbox) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	return c.WriteFile(ctx, path, data, mode)
}

func (s *podSandbox) ListFiles(ctx context.Context, path string) ([]conch.FileInfo, error) {
	c, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.ListFiles(ctx, path)
}
