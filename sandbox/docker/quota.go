package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"conch"

	"github.com/moby/moby/client"
)

// A workspace quota (Options.Disk) is a file system of its own: an ext4
// image under DataDir/workspaces, made sparse (it takes what is written),
// mounted by the engine as the workspace volume through a loop device
// (local driver, type=ext4, o=loop). Writes past its size fail with ENOSPC
// and `df /workspace` shows the limit; the image outlives containers like
// any volume and is deleted with it.
//
// Podman's local driver mounts with mount(8), which sets up the loop
// device. Docker's calls mount(2), which has no "loop" option, and its
// only other way (o=size on xfs with project quotas) needs the engine's
// data root on such a file system: Docker fails closed (checkDisk).

// LabelDisk is the workspace quota in bytes, on volumes made with one.
const LabelDisk = "conch.disk"

// MinDisk is the smallest workspace quota: ext4's own overhead is a few MiB.
const MinDisk = 16 << 20

// ErrNoDiskQuota is returned by New when a quota is asked of an engine that
// cannot enforce one.
var ErrNoDiskQuota = errors.New("the engine cannot enforce a workspace quota")

// checkDisk fails closed when a quota is asked and cannot be enforced.
func checkDisk(o Options, engine string) error {
	if o.Disk <= 0 {
		return nil
	}
	if o.Disk < MinDisk {
		return fmt.Errorf("sandbox.disk: %d bytes is below the minimum of 16 MiB", o.Disk)
	}
	if engine != EnginePodman {
		return &conch.Error{Kind: conch.KindInvalid,
			User: `sandbox.disk: ` + engine + ` cannot limit a workspace's size here; use Podman, or set sandbox.disk = "0" (CONCH_SANDBOX_DISK=0) to run without a workspace quota`,
			Err: fmt.Errorf("sandbox.disk: %w: %s's local volume driver mounts with mount(2), which cannot mount a loop image, "+
				`and its size option needs xfs with project quotas; use Podman, or set sandbox.disk = "0" (CONCH_SANDBOX_DISK=0) to run without a workspace quota`, ErrNoDiskQuota, engine)}
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return fmt.Errorf("sandbox.disk: %w: mkfs.ext4 is not installed (install e2fsprogs), "+
			`or set sandbox.disk = "0" (CONCH_SANDBOX_DISK=0) to run without a workspace quota`, ErrNoDiskQuota)
	}
	return nil
}

// diskImage is where the workspace volume name keeps its file system.
func (r *Runtime) diskImage(volume string) string {
	return filepath.Join(r.opts.DataDir, "workspaces", volume+".ext4")
}

// createVolume creates a workspace volume: with the quota as its own file
// system when one is set, else a plain local volume.
func (r *Runtime) createVolume(ctx context.Context, name string, labels map[string]string) error {
	opts := client.VolumeCreateOptions{Name: name, Labels: labels}
	if r.opts.Disk > 0 {
		img, err := r.makeDiskImage(ctx, name)
		if err != nil {
			return err
		}
		opts.Driver = "local"
		opts.DriverOpts = map[string]string{"type": "ext4", "device": img, "o": "loop,discard"}
		opts.Labels = map[string]string{LabelDisk: fmt.Sprint(r.opts.Disk)}
		for k, v := range labels {
			opts.Labels[k] = v
		}
	}
	if _, err := r.api.VolumeCreate(ctx, opts); err != nil {
		if r.opts.Disk > 0 {
			_ = os.Remove(r.diskImage(name))
		}
		return r.engineErr("create workspace volume "+name, err)
	}
	return nil
}

// makeDiskImage makes the sparse ext4 image of a workspace, owned by the
// tools' user at its root.
func (r *Runtime) makeDiskImage(ctx context.Context, volume string) (string, error) {
	img := r.diskImage(volume)
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return "", fmt.Errorf("workspace quota: %w", err)
	}
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("workspace quota: %w", err)
	}
	err = f.Truncate(r.opts.Disk)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(img)
		return "", fmt.Errorf("workspace quota: %w", err)
	}
	uid, gid, _ := strings.Cut(r.profile.User, ":")
	if gid == "" {
		gid = uid
	}
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-L", "workspace",
		"-E", "root_owner="+uid+":"+gid+",lazy_itable_init=1,lazy_journal_init=1,nodiscard", img)
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(img)
		return "", fmt.Errorf("workspace quota: mkfs.ext4 %s: %w: %s", img, err, strings.TrimSpace(string(out)))
	}
	return img, nil
}

// removeDiskImage deletes a removed volume's image, if it had one.
func (r *Runtime) removeDiskImage(volume string) {
	if err := os.Remove(r.diskImage(volume)); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.Warn("remove workspace image", "volume", volume, "err", err)
	}
}

// diskUse is the space a workspace's image takes on the host (its
// allocated blocks) and its size; ok is false for a workspace without one.
func (r *Runtime) diskUse(volume string) (used, limit int64, ok bool) {
	if volume == "" {
		return 0, 0, false
	}
	fi, err := os.Stat(r.diskImage(volume))
	if err != nil {
		return 0, 0, false
	}
	st, isSys := fi.Sys().(*syscall.Stat_t)
	if !isSys {
		return 0, 0, false
	}
	return st.Blocks * 512, fi.Size(), true
}

// humanBytes renders n coarsely: 12 KiB, 340 MiB, 1.5 GiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
