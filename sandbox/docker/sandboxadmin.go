package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"conch"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// This file is conch.SandboxAdmin over the engine's view in admin.go: what
// the CLI, /status and the dashboard render.

var (
	_ conch.SandboxAdmin = (*Runtime)(nil)
	_ conch.Releaser     = (*Runtime)(nil)
)

// Sandboxes lists every container of this instance, warm-pool ones
// included: conversations first (by key), then the pool.
func (r *Runtime) Sandboxes(ctx context.Context) ([]conch.SandboxInfo, error) {
	all, _, err := r.inspectAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]conch.SandboxInfo, len(all))
	for i, f := range all {
		out[i] = f.s
	}
	return out, nil
}

// SandboxInfo describes the conversation's sandbox; a *conch.NoSandboxError
// (KindNotFound, with the workspaces kept) when it has no container.
func (r *Runtime) SandboxInfo(ctx context.Context, key conch.ConversationKey) (conch.SandboxInfo, error) {
	f, err := r.inspectOwn(ctx, key)
	if err != nil {
		return conch.SandboxInfo{}, err
	}
	return f.s, nil
}

// inspectOwn inspects the container named for key.
func (r *Runtime) inspectOwn(ctx context.Context, key conch.ConversationKey) (*inspected, error) {
	if key.Channel == "" || key.ID == "" {
		return nil, conch.Errorf(conch.KindInvalid, "no conversation given")
	}
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	if err := r.reg.refresh(); err != nil {
		return nil, err
	}
	name := ContainerName(r.opts.InstanceID, key)
	ins, err := r.api.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		ws, err := r.workspacesOf(ctx, key)
		if err != nil {
			return nil, err
		}
		return nil, &conch.NoSandboxError{Key: key, Workspaces: ws}
	}
	if err != nil {
		return nil, r.engineErr("inspect sandbox "+name, err)
	}
	known, err := r.knownSet(ctx)
	if err != nil {
		return nil, err
	}
	want, err := r.wantImageHash(ctx)
	if err != nil {
		return nil, r.engineErr("inspect sandbox "+name, err)
	}
	return &inspected{s: r.summarize(ins.Container, known, want), c: ins.Container}, nil
}

// SandboxStats reads the conversation's sandbox's resource use: one stats
// sample from the engine (CPU over the engine's own interval) and the size
// of its workspace volume. A stopped sandbox uses nothing but its disk.
func (r *Runtime) SandboxStats(ctx context.Context, key conch.ConversationKey) (conch.SandboxStats, error) {
	f, err := r.inspectOwn(ctx, key)
	if err != nil {
		return conch.SandboxStats{}, err
	}
	st := conch.SandboxStats{DiskBytes: -1}
	if f.s.Running {
		res, err := r.api.ContainerStats(ctx, f.s.ID, client.ContainerStatsOptions{Stream: false, IncludePreviousSample: true})
		if err != nil {
			return conch.SandboxStats{}, r.engineErr("stats of sandbox "+f.s.Name, err)
		}
		var raw container.StatsResponse
		err = json.NewDecoder(res.Body).Decode(&raw)
		res.Body.Close()
		if err != nil {
			return conch.SandboxStats{}, fmt.Errorf("stats of sandbox %s: %w", f.s.Name, err)
		}
		st = statsFrom(raw)
		st.PIDsLimit = r.pidsLimit(raw)
	} else if hc := f.c.HostConfig; hc != nil {
		st.MemoryLimit = hc.Memory
	}
	if used, limit, ok := r.diskUse(ctx, f.s.Workspace); ok {
		st.DiskBytes, st.DiskLimit = used, limit
	} else {
		st.DiskBytes = r.volumeBytes(ctx, f.s.Workspace)
		st.DiskQuotaMissing = r.opts.Disk > 0
	}
	return st, nil
}

// pids reads the container's process count and limit from one stats sample.
func (r *Runtime) pids(ctx context.Context, id string) (cur, limit int64, ok bool) {
	res, err := r.api.ContainerStats(ctx, id, client.ContainerStatsOptions{Stream: false})
	if err != nil {
		return 0, 0, false
	}
	defer res.Body.Close()
	var raw container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&raw); err != nil {
		return 0, 0, false
	}
	return int64(raw.PidsStats.Current), r.pidsLimit(raw), true
}

// pidsLimit is a stats sample's process limit, or the profile's: Podman's
// stats leave it out.
func (r *Runtime) pidsLimit(raw container.StatsResponse) int64 {
	if limit := int64(raw.PidsStats.Limit); limit > 0 && limit <= 1<<22 {
		return limit
	}
	return r.profile.Pids
}

// atPidsLimit: too few processes are left to start the agent.
func atPidsLimit(cur, limit int64) bool {
	return conch.SandboxStats{PIDs: cur, PIDsLimit: limit}.AtPIDsLimit()
}

// statsFrom turns one engine stats sample into SandboxStats (DiskBytes -1).
// CPU is the usage delta over the sample's interval, as a percentage of one
// CPU; memory leaves out the page cache (inactive file pages), as
// `docker stats` does.
func statsFrom(s container.StatsResponse) conch.SandboxStats {
	st := conch.SandboxStats{DiskBytes: -1, MemoryLimit: int64(s.MemoryStats.Limit), PIDs: int64(s.PidsStats.Current)}
	cpu := float64(s.CPUStats.CPUUsage.TotalUsage) - float64(s.PreCPUStats.CPUUsage.TotalUsage)
	system := float64(s.CPUStats.SystemUsage) - float64(s.PreCPUStats.SystemUsage)
	cpus := float64(s.CPUStats.OnlineCPUs)
	if cpus == 0 {
		cpus = float64(max(len(s.CPUStats.CPUUsage.PercpuUsage), 1))
	}
	elapsed := s.Read.Sub(s.PreRead)
	switch {
	case cpu <= 0 || s.PreCPUStats.CPUUsage.TotalUsage == 0:
	case system > 0:
		st.CPUPercent = cpu / system * cpus * 100
	case elapsed > 0 && !s.PreRead.IsZero():
		st.CPUPercent = cpu / float64(elapsed.Nanoseconds()) * 100
	}
	usage := s.MemoryStats.Usage
	cache := s.MemoryStats.Stats["total_inactive_file"] // cgroup v1
	if cache == 0 || cache >= usage {
		cache = s.MemoryStats.Stats["inactive_file"] // cgroup v2
	}
	if cache < usage {
		usage -= cache
	}
	st.MemoryBytes = int64(usage)
	return st
}

// volumeBytes is the size of a volume as the engine computes it, or -1 when
// the engine does not tell (or takes longer than a few seconds to).
func (r *Runtime) volumeBytes(ctx context.Context, name string) int64 {
	if name == "" {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	du, err := r.api.DiskUsage(ctx, client.DiskUsageOptions{Volumes: true})
	if err != nil {
		r.log.Debug("volume disk usage", "volume", name, "err", err)
		return -1
	}
	for _, v := range du.Volumes.Items {
		if v.Name == name && v.UsageData != nil && v.UsageData.Size >= 0 {
			return v.UsageData.Size
		}
	}
	return -1
}
