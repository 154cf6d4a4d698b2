package gateway

import (
	"context"
	"fmt"
	"io"

	"conch"
)

// copyFile copies one spooled file into the sandbox at a.Path.
func copyFile(ctx context.Context, st conch.AttachmentStore, sb conch.Sandbox, a conch.Attachment) error {
	r, err := st.Open(ctx, a.Ref)
	if err != nil {
		return fmt.Errorf("open %s: %w", a.Ref, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read %s: %w", a.Ref, err)
	}
	if err := sb.WriteFile(ctx, a.Path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", a.Path, err)
	}
	return nil
}
