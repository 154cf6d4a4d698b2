package sandboxd

import (
	"bytes"
	"context"
	"errors"

	"conch"
)

var _ conch.WorkspaceReader = (*Client)(nil)

// ReadWorkspaceFile implements conch.WorkspaceReader: the agent opens the
// file under /workspace without following any symbolic link and reads it
// only when it is a regular file of at most limit bytes (limit ≤ 0 means
// DefaultReadLimit); a larger one is a *conch.FileTooLargeError.
func (c *Client) ReadWorkspaceFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	var data []byte
	err := c.retry(ctx, func(s *session) error {
		st, err := s.open(ctx, request{Op: opReadWorkspace, Path: path, Limit: limit})
		if err != nil {
			return err
		}
		defer s.forget(st)
		var buf bytes.Buffer
		res, err := st.wait(ctx, func(b []byte) { buf.Write(b) })
		if err != nil {
			return err
		}
		if we := res.Error; we != nil {
			if we.Code == codeTooLarge {
				return &conch.Error{Kind: conch.KindInvalid, User: we.Message, Err: &conch.FileTooLargeError{Path: path, Size: we.Size, Limit: limit}}
			}
			return remoteErr("read "+path, we)
		}
		data = buf.Bytes()
		if data == nil {
			data = []byte{}
		}
		return nil
	})
	if err != nil {
		var tl *conch.FileTooLargeError
		if errors.As(err, &tl) {
			return nil, err
		}
		return nil, wrapOp("read workspace file", err)
	}
	return data, nil
}
