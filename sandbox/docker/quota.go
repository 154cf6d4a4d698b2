package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"conch"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// A workspace quota (Options.Disk) is enforced in one of two ways, chosen
// by New (diskModeFor):
//
// On Podman it is a file system of its own: an ext4 image under
// DataDir/workspaces, made sparse (it takes what is written), mounted by the
// engine as the workspace volume through a loop device (local driver,
// type=ext4, o=loop). Podman's local driver mounts with mount(8), which sets
// up the loop device. The image is deleted with the volume.
//
// Docker's local driver mounts with mount(2), which has no "loop" option.
// Its own way is the volume option size=: an xfs project quota on the
// volume's directory (moby volume/local and quota, 20.10 to today). The
// engine enables it only when its data root's volumes directory is on xfs
// mounted with project quotas (prjquota/pquota), from a cgo build, outside a
// user namespace; otherwise it refuses a volume with size= ("quota size
// requested but no quota support"). New creates and removes a probe volume
// with size= and fails closed (ErrNoDiskQuota) on that refusal. The engine
// sets the quota again each time it mounts the volume, and a failure there
// fails the container's start: never a container without its quota.
//
// Either way writes past the size fail with ENOSPC, `df /workspace` shows
// the limit, and the quota outlives containers like the volume itself.

// LabelDisk is the workspace quota in bytes, on volumes made with one.
const LabelDisk = "conch.disk"

// MinDisk is the smallest workspace quota: ext4's own overhead is a few MiB.
const MinDisk = 16 << 20

// ErrNoDiskQuota is returned by New when a quota is asked of an engine that
// cannot enforce one.
var ErrNoDiskQuota = errors.New("the engine cannot enforce a workspace quota")

// diskMode is how a Runtime limits its workspaces.
type diskMode int

const (
	// diskNone: no quota.
	diskNone diskMode = iota
	// diskImage: an ext4 image per workspace, loop-mounted (Podman).
	diskImage
	// diskSizeOpt: the local driver's size option, an xfs project quota
	// (Docker with its data root on xfs mounted with prjquota).
	diskSizeOpt
)

// diskModeFor decides how o.Disk is enforced on the engine, probing Docker;
// when a quota is asked and cannot be enforced it fails (ErrNoDiskQuota for
// an engine that cannot).
func diskModeFor(ctx context.Context, o Options, engine string, api engineAPI) (diskMode, error) {
	if o.Disk <= 0 {
		return diskNone, nil
	}
	if o.Disk < MinDisk {
		return diskNone, fmt.Errorf("sandbox.disk: %d bytes is below the minimum of 16 MiB", o.Disk)
	}
	if engine == EnginePodman {
		if _, err := exec.LookPath("mkfs.ext4"); err != nil {
			return diskNone, fmt.Errorf("sandbox.disk: %w: mkfs.ext4 is not installed (install e2fsprogs), "+
				`or set sandbox.disk = "0" (CONCH_SANDBOX_DISK=0) to run without a workspace quota`, ErrNoDiskQuota)
		}
		return diskImage, nil
	}
	if err := probeSizeOpt(ctx, api, engine, o.Disk); err != nil {
		return diskNone, err
	}
	return diskSizeOpt, nil
}

// probeSizeOpt asks the engine for a volume with the size option and
// removes it: the engine itself says whether it can enforce one.
func probeSizeOpt(ctx context.Context, api engineAPI, engine string, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	name := "conch-quota-probe-" + randomHex(6)
	_, err := api.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Driver: "local",
		DriverOpts: map[string]string{"size": strconv.FormatInt(size, 10)}})
	if err == nil {
		_, rerr := api.VolumeRemove(context.WithoutCancel(ctx), name, client.VolumeRemoveOptions{Force: true})
		if rerr != nil && !cerrdefs.IsNotFound(rerr) {
			return fmt.Errorf("sandbox.disk: remove the quota probe volume %s: %w", name, rerr)
		}
		return nil
	}
	if !cerrdefs.IsInvalidArgument(err) {
		return fmt.Errorf("sandbox.disk: probe %s's volume size option: %w", engine, err)
	}
	return &conch.Error{Kind: conch.KindInvalid,
		User: `sandbox.disk: ` + engine + ` cannot limit a workspace's size here (only with its data root on xfs mounted with prjquota); ` +
			`use Podman, or set sandbox.disk = "0" (CONCH_SANDBOX_DISK=0) to run without a workspace quota`,
		Err: fmt.Errorf("sandbox.disk: %w: %s refused a volume with the size option (%v): its local volume driver "+
			"enforces a size only with the data root's volumes directory on xfs mounted with project quotas (prjquota), "+
			"and it mounts with mount(2), which cannot mount a loop image; "+
			`use Podman, or set sandbox.disk = "0" (CONCH_SANDBOX_DISK=0) to run without a workspace quota`, ErrNoDiskQuota, engine, err)}
}

// diskImage is where the workspace volume name keeps its file system.
func (r *Runtime) diskImage(volume string) string {
	return filepath.Join(r.opts.DataDir, "workspaces", volume+".ext4")
}

// createVolume creates a workspace volume: with the quota as its own file
// system (diskImage) or the size option (diskSizeOpt) when one is set, else
// a plain local volume.
func (r *Runtime) createVolume(ctx context.Context, name string, labels map[string]string) error {
	opts := client.VolumeCreateOptions{Name: name, Labels: labels}
	switch r.disk {
	case diskImage:
		img, err := r.makeDiskImage(ctx, name)
		if err != nil {
			return err
		}
		opts.DriverOpts = map[string]string{"type": "ext4", "device": img, "o": "loop,discard"}
	case diskSizeOpt:
		opts.DriverOpts = map[string]string{"size": strconv.FormatInt(r.opts.Disk, 10)}
	}
	if r.disk != diskNone {
		opts.Driver = "local"
		opts.Labels = map[string]string{LabelDisk: strconv.FormatInt(r.opts.Disk, 10)}
		for k, v := range labels {
			opts.Labels[k] = v
		}
	}
	if _, err := r.api.VolumeCreate(ctx, opts); err != nil {
		if r.disk == diskImage {
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

// diskUse is the space a workspace takes and its quota; ok is false for a
// workspace without one. With an image it is the image's allocated blocks;
// with the size option the project quota's use as statfs reports it on the
// volume's directory (conch on the engine's host), else as the engine
// computes it, or -1 when neither tells.
func (r *Runtime) diskUse(ctx context.Context, volume string) (used, limit int64, ok bool) {
	if volume == "" {
		return 0, 0, false
	}
	if fi, err := os.Stat(r.diskImage(volume)); err == nil {
		if st, isSys := fi.Sys().(*syscall.Stat_t); isSys {
			return st.Blocks * 512, fi.Size(), true
		}
	}
	if r.info.Engine == EnginePodman {
		return 0, 0, false
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := r.api.VolumeInspect(ictx, volume, client.VolumeInspectOptions{})
	if err != nil || v.Volume.Options["size"] == "" {
		return 0, 0, false
	}
	limit, err = strconv.ParseInt(v.Volume.Labels[LabelDisk], 10, 64)
	if err != nil || limit <= 0 {
		return 0, 0, false
	}
	// xfs answers statfs on a directory that passes its project on (moby
	// sets that flag) with the project quota's limit (rounded up to whole
	// blocks) and use.
	var fs syscall.Statfs_t
	if v.Volume.Mountpoint != "" && syscall.Statfs(v.Volume.Mountpoint, &fs) == nil {
		bs := int64(fs.Bsize)
		if d := int64(fs.Blocks)*bs - limit; bs > 0 && d >= 0 && d < bs {
			return int64(fs.Blocks-fs.Bfree) * bs, limit, true
		}
	}
	return r.volumeBytes(ctx, volume), limit, true
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
