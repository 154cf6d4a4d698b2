package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"conch"
)

// DefaultSendLimit caps one sent file on a channel without its own limit.
const DefaultSendLimit = 25 << 20

// MaxSendFiles is how many files one send_file call takes.
const MaxSendFiles = 10

// SendFileOptions configures send_file.
type SendFileOptions struct {
	// Store keeps the files until the answer carrying them is delivered
	// (the spool). Required.
	Store conch.AttachmentStore
	// Limit is the largest file the conversation's channel takes; nil or
	// 0 means DefaultSendLimit.
	Limit func(conch.ChannelName) int64
	// Auditor, if set, records every file sent or refused (kind "file_send").
	Auditor conch.AuditStore
	// Now is the clock of audit events; nil means time.Now.
	Now func() time.Time
}

// SendFile is the tool send_file: workspace files go out with the turn's
// answer, shown natively by the channel (a photo, an image, a document).
//
// The sandbox reads the file itself (conch.WorkspaceReader): resolved under
// /workspace without following any symbolic link, regular files only, at
// most the channel's limit. The copy is spooled on the host and stored with
// the tool's result, so the answer sends it even after a crash.
type SendFile struct{ opts SendFileOptions }

var _ conch.Tool = (*SendFile)(nil)

// NewSendFile returns the send_file tool.
func NewSendFile(opts SendFileOptions) (*SendFile, error) {
	if opts.Store == nil {
		return nil, errors.New("send_file: no file store")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &SendFile{opts: opts}, nil
}

type sendFileArgs struct {
	Paths []string `json:"paths" jsonschema:"the files to send, relative to /workspace or absolute under /workspace (1 to 10)"`
}

// Spec implements conch.Tool.
func (t *SendFile) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "send_file",
		Description: "Send files from /workspace to the person with your answer: images (PNG, JPEG, GIF, WebP) are shown " +
			"as pictures, other files as attachments. Use it for a chart, a picture or a document you made; " +
			"the files arrive with your final answer, so do not paste their paths or contents there. Only regular " +
			"files under /workspace can be sent (no symbolic links, no \"..\"); each channel has a size limit.",
		Parameters: schemaFor[sendFileArgs](),
	}
}

// Run implements conch.Tool.
func (t *SendFile) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args sendFileArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return conch.ToolFail(`send_file needs {"paths": [string, ...]}: ` + err.Error()), nil
	}
	switch n := len(args.Paths); {
	case n == 0:
		return conch.ToolFail("send_file needs at least one path"), nil
	case n > MaxSendFiles:
		return conch.ToolFail(fmt.Sprintf("send_file takes at most %d files per call (%d given); send the rest in another call, or pack them into one archive", MaxSendFiles, n)), nil
	}
	for _, p := range args.Paths {
		if p == "" || strings.IndexByte(p, 0) >= 0 || len(p) > maxPathLen {
			return conch.ToolFail(fmt.Sprintf("send_file: %q is not a usable path", clipName(p))), nil
		}
	}
	sb, out, err := sandbox(ctx, env, "send_file")
	if out != nil || err != nil {
		return deref(out), err
	}
	wr, ok := sb.(conch.WorkspaceReader)
	if !ok {
		return conch.ToolFail("files cannot be sent from this computer (its sandbox cannot read files safely)"), nil
	}
	limit := t.limit(env.Conversation.Channel)
	var files []conch.Attachment
	var lines []string
	for _, p := range args.Paths {
		data, err := wr.ReadWorkspaceFile(ctx, p, limit)
		if err != nil {
			var tl *conch.FileTooLargeError
			msg := ""
			switch {
			case errors.As(err, &tl):
				msg = fmt.Sprintf("%s is %s, over the %s limit for files sent on %s; make it smaller (compress it, lower the resolution, split it) or tell the person where it is",
					p, humanSize(tl.Size), humanSize(limit), env.Conversation.Channel)
			case conch.KindOf(err) == conch.KindNotFound || conch.KindOf(err) == conch.KindInvalid || conch.KindOf(err) == conch.KindUnavailable:
				msg = "not sent: " + conch.UserMessage(err)
			default:
				return conch.ToolOutput{}, fmt.Errorf("send_file %s: %w", p, err)
			}
			t.audit(ctx, env, p, 0, msg)
			return conch.ToolFail(msg + sentSoFar(files)), nil
		}
		name := conch.SafeName(path.Base(p), "file")
		where := p
		if !path.IsAbs(where) {
			where = path.Join(workspaceDir, where)
		}
		a := conch.Attachment{Name: name, MediaType: mediaType(name, data), Size: int64(len(data)), Path: path.Clean(where)}
		a.Open = func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
		ref, size, err := t.opts.Store.Put(ctx, env.Conversation, a, limit)
		if err != nil {
			return conch.ToolOutput{}, fmt.Errorf("send_file: spool %s: %w", p, err)
		}
		a.Ref, a.Size, a.Open = ref, size, nil
		files = append(files, a)
		t.audit(ctx, env, p, size, "")
		lines = append(lines, fmt.Sprintf("- %s (%s, %s)", name, a.MediaType, humanSize(size)))
	}
	return conch.ToolOutput{
		Content:     "These files will be sent with your answer:\n" + strings.Join(lines, "\n") + "\nDo not repeat their paths or contents in the answer.",
		Attachments: files,
	}, nil
}

func (t *SendFile) limit(ch conch.ChannelName) int64 {
	if t.opts.Limit != nil {
		if n := t.opts.Limit(ch); n > 0 {
			return n
		}
	}
	return DefaultSendLimit
}

func (t *SendFile) audit(ctx context.Context, env conch.ToolEnv, p string, size int64, refused string) {
	detail := map[string]any{"path": p, "size": size}
	if refused != "" {
		detail["refused"] = refused
	}
	_ = conch.RecordAudit(ctx, t.opts.Auditor, t.opts.Now(), conch.AuditFileSend, env.Conversation, detail)
}

// sentSoFar tells the model that files queued before a refusal still go.
func sentSoFar(files []conch.Attachment) string {
	if len(files) == 0 {
		return ""
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
	}
	return fmt.Sprintf(" (nothing of this call is sent; %s not queued either: call send_file again with the files that can go)", strings.Join(names, ", "))
}

// mediaType names a file's type: by its content for the image formats the
// channels show as pictures (a .png that is not a PNG is not sent as one),
// else by its extension, else by its content.
func mediaType(name string, data []byte) string {
	sniffed := http.DetectContentType(data)
	if strings.HasPrefix(sniffed, "image/") {
		return sniffed
	}
	if t := mime.TypeByExtension(strings.ToLower(path.Ext(name))); t != "" && !strings.HasPrefix(t, "image/") {
		return t
	}
	if i := strings.IndexByte(sniffed, ';'); i > 0 && !strings.HasPrefix(sniffed, "text/") {
		return sniffed[:i]
	}
	return sniffed
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func clipName(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
