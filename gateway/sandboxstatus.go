package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"conch"
)

// SandboxStatus is /status's line about a conversation's computer, rendered
// from the backend's view (conch.SandboxAdmin), e.g. "Computer:
// conch-matrix-abc-1234abcd, running, idle 3m, processes 9/128, image
// current". It never fails: a problem reads "Computer: unknown: <reason>",
// its detail logged. Backends' tests read their view through it as people
// do.
func SandboxStatus(ctx context.Context, admin conch.SandboxAdmin, key conch.ConversationKey, now time.Time, log *slog.Logger) string {
	const p = "Computer: "
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The live figures take the backend a moment (a CPU sample): they are
	// read beside the description.
	var (
		st    conch.SandboxStats
		stErr error
		wg    sync.WaitGroup
	)
	wg.Go(func() { st, stErr = admin.SandboxStats(ctx, key) })
	info, err := admin.SandboxInfo(ctx, key)
	wg.Wait()
	var none *conch.NoSandboxError
	switch {
	case errors.As(err, &none) && len(none.Workspaces) > 0:
		return p + "none now, workspace kept (a container is created on next use)"
	case errors.As(err, &none):
		return p + "none yet (created on first use)"
	case err != nil:
		return p + "unknown: " + sandboxErrReason(err, log)
	}
	if info.State == "" {
		return p + info.Name + ", unknown: the engine reported no state"
	}
	parts := []string{info.Name}
	switch {
	case info.Running:
		parts = append(parts, "running")
	case info.State == conch.SandboxExited:
		s := "stopped"
		if info.OOMKilled {
			s += " (out of memory)"
		}
		parts = append(parts, s+", restarted on next use")
	default:
		parts = append(parts, info.State)
	}
	switch {
	case info.Busy:
		parts = append(parts, "busy")
	case !info.LastUsed.IsZero():
		parts = append(parts, "idle "+humanDuration(now.Sub(info.LastUsed)))
	}
	if stErr != nil {
		log.Debug("sandbox stats for /status", "conversation", key.String(), "err", stErr)
	} else {
		if info.Running && st.PIDsLimit > 0 {
			if st.AtPIDsLimit() {
				parts = append(parts, fmt.Sprintf("processes %d/%d: at its limit, cannot start programs (recovered on next use)", st.PIDs, st.PIDsLimit))
			} else {
				parts = append(parts, fmt.Sprintf("processes %d/%d", st.PIDs, st.PIDsLimit))
			}
		}
		switch {
		case st.DiskLimit > 0 && st.DiskBytes >= 0:
			parts = append(parts, fmt.Sprintf("workspace %s of %s used", humanBytes(st.DiskBytes), humanBytes(st.DiskLimit)))
		case st.DiskLimit > 0:
			parts = append(parts, fmt.Sprintf("workspace limited to %s", humanBytes(st.DiskLimit)))
		case st.DiskQuotaMissing:
			parts = append(parts, "workspace without a quota (made before sandbox.disk was set)")
		}
	}
	if info.ImageCurrent {
		parts = append(parts, "image current")
	} else {
		parts = append(parts, "image stale")
	}
	return p + strings.Join(parts, ", ")
}

// sandboxErrReason is a reason safe to show in a chat; the detail is logged.
func sandboxErrReason(err error, log *slog.Logger) string {
	log.Warn("describe sandbox", "err", err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "the container engine did not answer in time"
	case conch.KindOf(err) == conch.KindUnavailable:
		return "the container engine does not answer"
	case conch.KindOf(err) == conch.KindInvalid:
		return conch.UserMessage(err)
	}
	return "the container engine reported an error (see the logs)"
}

// humanDuration renders d coarsely: 45s, 3m, 2h5m, 4d.
func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m > 0 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
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
