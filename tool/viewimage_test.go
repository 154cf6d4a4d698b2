package tool

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type viewArgs struct {
	Path string `json:"path"`
}

func TestViewImage(t *testing.T) {
	env, h := hostEnv(t)
	img := image.NewNRGBA(image.Rect(0, 0, 30, 20))
	for i := range img.Pix {
		img.Pix[i] = 200
	}
	img.SetNRGBA(0, 0, color.NRGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile(t.Context(), "plots/chart.png", b.Bytes(), 0); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile(t.Context(), "broken.png", b.Bytes()[:b.Len()/2], 0); err != nil {
		t.Fatal(err)
	}
	// Symbolic links inside the workspace: to a file outside it and to a
	// directory; view_image refuses both.
	root := filepath.Join(h.Dir, "workspace")
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "passwd.png")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "plots"), filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	tl := NewViewImage()

	out := runTool(t, tl, env, viewArgs{Path: "plots/chart.png"})
	if out.IsError || len(out.Images) != 1 || out.Images[0].MediaType != "image/png" || out.Images[0].Name != "/workspace/plots/chart.png" {
		t.Fatalf("view chart: %+v", out)
	}
	if !strings.Contains(out.Content, "30×20") {
		t.Errorf("content %q does not give the size", out.Content)
	}
	for _, c := range []struct{ path, want string }{
		{"passwd.png", "symbolic link"},
		{"linked/chart.png", "symbolic link"},
		{"/etc/passwd", "outside /workspace"},
		{"/tmp/x.png", "not a file under /workspace"},
		{"../etc/passwd", "outside /workspace"},
		{"plots", "is a directory"},
		{"missing.png", "does not exist"},
		{"broken.png", "damaged or truncated"},
	} {
		out := runTool(t, tl, env, viewArgs{Path: c.path})
		if !out.IsError || len(out.Images) != 0 || !strings.Contains(out.Content, c.want) {
			t.Errorf("view %s: %+v, want an error with %q", c.path, out, c.want)
		}
	}
}
