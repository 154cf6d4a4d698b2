package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"conch"
	"conch/media"
)

// ViewImage is the tool view_image: the model looks at a picture in its
// workspace (a plot it drew, a received photo again). Only regular files
// under /workspace are read, through the sandbox; no component of the path
// may be a symbolic link. The picture is prepared as received ones are
// (bombs refused, orientation applied, scaled, metadata dropped).
type ViewImage struct{}

var _ conch.Tool = (*ViewImage)(nil)

// NewViewImage returns the view_image tool.
func NewViewImage() *ViewImage { return &ViewImage{} }

type viewImageArgs struct {
	Path string `json:"path" jsonschema:"picture file, relative to /workspace or absolute under /workspace (PNG, JPEG, GIF, WebP, BMP, TIFF)"`
}

// Spec implements conch.Tool.
func (t *ViewImage) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "view_image",
		Description: "Look at a picture file in your computer (a chart you drew, a screenshot, a received photo): " +
			"it is shown to you with the result. Only regular files under /workspace; relative paths are under /workspace.",
		Parameters: schemaFor[viewImageArgs](),
	}
}

// Run implements conch.Tool.
func (t *ViewImage) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args viewImageArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return conch.ToolFail(`view_image needs {"path": string}: ` + err.Error()), nil
	}
	p, msg := sandboxPath(args.Path)
	if msg != "" {
		return conch.ToolFail(msg), nil
	}
	if p == workspaceDir || !strings.HasPrefix(p, workspaceDir+"/") {
		return conch.ToolFail(fmt.Sprintf("refused: %s is not a file under /workspace; view_image reads pictures there only", p)), nil
	}
	sb, out, err := sandbox(ctx, env, "view_image")
	if out != nil || err != nil {
		return deref(out), err
	}
	if msg, err := regularFile(ctx, sb, p); msg != "" || err != nil {
		if err != nil {
			return sandboxFailure("view_image", err)
		}
		return conch.ToolFail(msg), nil
	}
	data, err := sb.ReadFile(ctx, p, media.MaxInput+1)
	if err != nil {
		return sandboxFailure("view_image", err)
	}
	if len(data) > media.MaxInput {
		return conch.ToolFail(fmt.Sprintf("%s is more than %d MB; view_image reads smaller pictures (scale it down first, e.g. with Python's PIL)", p, media.MaxInput>>20)), nil
	}
	pic, err := media.PrepareImage(data)
	if err != nil {
		return conch.ToolFail(fmt.Sprintf("%s cannot be shown: %v", p, err)), nil
	}
	return conch.ToolOutput{
		Content: fmt.Sprintf("%s: %s picture, shown as %d×%d %s.", p, strings.ToUpper(pic.Format), pic.Width, pic.Height, pic.MediaType),
		Images:  []conch.Image{{MediaType: pic.MediaType, Data: pic.Data, Name: p}},
	}, nil
}

// regularFile checks, by listing each directory from /workspace down, that
// no component of p is a symbolic link and that p is a regular file. The
// message, when not empty, is for the model.
func regularFile(ctx context.Context, sb conch.Sandbox, p string) (string, error) {
	rel := strings.TrimPrefix(p, workspaceDir+"/")
	parts := strings.Split(rel, "/")
	dir := workspaceDir
	for i, name := range parts {
		entries, err := sb.ListFiles(ctx, dir)
		if err != nil {
			return "", err
		}
		var found *conch.FileInfo
		for k := range entries {
			if entries[k].Name == name {
				found = &entries[k]
				break
			}
		}
		here := path.Join(dir, name)
		last := i == len(parts)-1
		switch {
		case found == nil:
			return fmt.Sprintf("%s does not exist", here), nil
		case found.Mode&fs.ModeSymlink != 0:
			return fmt.Sprintf("refused: %s is a symbolic link; view_image reads regular files only", here), nil
		case !last && !found.IsDir:
			return fmt.Sprintf("%s is not a directory", here), nil
		case last && found.IsDir:
			return fmt.Sprintf("%s is a directory; give a picture file", here), nil
		case last && !found.Mode.IsRegular():
			return fmt.Sprintf("refused: %s is not a regular file (a device, pipe or socket)", here), nil
		}
		dir = here
	}
	return "", nil
}
