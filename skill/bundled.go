package skill

import (
	"embed"
	"io/fs"
)

//go:embed all:bundled
var bundledFS embed.FS

// Bundled returns the skills built into conch.
func Bundled() fs.FS {
	sub, err := fs.Sub(bundledFS, "bundled")
	if err != nil {
		panic(err) // the embedded tree always has the directory
	}
	return sub
}
