package docker

import (
	"context"
	"os"
	"path/filepath"

	"github.com/moby/moby/client"

	sandboximage "conch/images/sandbox"
)

// pruneReplacedBase runs after the configured image was (re)built: the
// image the reference named before, if conch built it from an older
// definition, is removed when no container uses it (one that does is kept
// until the sandbox goes; the next rebuild tries again), and the cached root
// file systems of older definitions are deleted. Failures only log.
func (r *Runtime) pruneReplacedBase(ctx context.Context, prev imageState, prevFound bool, built imageState) {
	if prevFound && prev.Managed && prev.ID != "" && prev.ID != built.ID {
		if _, err := r.api.ImageRemove(ctx, prev.ID, client.ImageRemoveOptions{}); err != nil {
			r.log.Info("older sandbox image kept (in use?)", "image", prev.ID, "hash", prev.Hash, "err", err)
		} else {
			r.log.Info("older sandbox image removed", "image", prev.ID, "hash", prev.Hash)
		}
	}
	if r.opts.CacheDir == "" {
		return
	}
	keep := sandboximage.RootfsPath(r.opts.CacheDir)
	old, _ := filepath.Glob(filepath.Join(r.opts.CacheDir, "rootfs-*.tar.gz"))
	for _, p := range old {
		if p == keep {
			continue
		}
		if err := os.Remove(p); err != nil {
			r.log.Info("older sandbox root file system kept", "path", p, "err", err)
			continue
		}
		r.log.Info("older sandbox root file system removed", "path", p)
	}
}
