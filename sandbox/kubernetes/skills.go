//go:build kubernetes

package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"conch/sandbox/sandboxd"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// Skills in pods. Docker bind-mounts the host's skills directory read-only;
// a pod cannot mount a host directory, so each pod has a skills volume that
// is read-only in its sandbox container and writable only in its skills
// container. On use, when the host directory's content hash differs from
// what the pod was last given, conch streams the directory as a tar into
// one exec of `conch sandbox-init --unpack` in the skills container. The
// pod keeps the hash it holds, so after a conch restart an unchanged set
// costs that one exec and no copy.

const (
	skillsHashEvery  = time.Second      // the host directory is hashed at most this often
	skillsRetryAfter = 10 * time.Second // after a failed copy, the next try waits this long
	skillsTimeout    = time.Minute      // one copy
)

// skillsHash caches the host directory's hash. The skills manager
// replaces a skill by renaming a new copy into place, which changes the
// directory's modification time: a changed time is hashed again at once.
type skillsHash struct {
	mu    sync.Mutex
	at    time.Time
	mtime time.Time
	hash  string
	err   error
}

// skillsSent is what one conversation's pod was given.
type skillsSent struct {
	uid    string    // the pod
	hash   string    // the tree it holds
	failed time.Time // the last failed copy (to the current uid)
}

func (r *Runtime) hostSkillsHash() (string, error) {
	c := &r.skillsHash
	c.mu.Lock()
	defer c.mu.Unlock()
	now := r.opts.Now()
	var mtime time.Time
	if fi, err := os.Stat(r.opts.SkillsDir); err == nil {
		mtime = fi.ModTime()
	}
	if c.at.IsZero() || !mtime.Equal(c.mtime) || now.Sub(c.at) >= skillsHashEvery || now.Before(c.at) {
		c.hash, c.err = sandboxd.TreeHash(r.opts.SkillsDir)
		c.at, c.mtime = now, mtime
	}
	return c.hash, c.err
}

// syncSkillsLocked gives b's pod the host's skills when they changed since
// it was last given them. A failure is logged and tried again later: the
// conversation's computer works without its skill files.
func (r *Runtime) syncSkillsLocked(ctx context.Context, b *box) {
	if r.opts.SkillsDir == "" || b.uid == "" {
		return
	}
	hash, err := r.hostSkillsHash()
	if err != nil {
		r.opts.Logger.Warn("skills not copied into sandbox pods", "dir", r.opts.SkillsDir, "err", err)
		return
	}
	sent := &b.skills
	if sent.uid == b.uid && sent.hash == hash {
		return
	}
	now := r.opts.Now()
	if sent.uid == b.uid && !sent.failed.IsZero() && now.Sub(sent.failed) < skillsRetryAfter {
		return
	}
	if err := r.copySkills(ctx, b.name, hash); err != nil {
		if ctx.Err() == nil {
			r.opts.Logger.Warn("skills not copied into sandbox pod (tried again on a later use)", "pod", b.name, "err", err)
		}
		held := ""
		if sent.uid == b.uid {
			held = sent.hash
		}
		*sent = skillsSent{uid: b.uid, hash: held, failed: now}
		return
	}
	*sent = skillsSent{uid: b.uid, hash: hash}
}

// copySkills streams the host's skills into pod's skills container. A
// skills container not running yet (a pod just started) is waited for a
// little.
func (r *Runtime) copySkills(ctx context.Context, pod, hash string) error {
	ctx, cancel := context.WithTimeout(ctx, skillsTimeout)
	defer cancel()
	var tree bytes.Buffer
	if err := sandboxd.PackTree(r.opts.SkillsDir, &tree); err != nil {
		return err
	}
	cmd := []string{r.opts.AgentPath, "sandbox-init", "--unpack", SkillsPath, "--hash", hash}
	var err error
	for attempt := range 4 {
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(attempt) * 250 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var out string
		out, err = r.execOnce(ctx, pod, SkillsContainer, cmd, bytes.NewReader(tree.Bytes()))
		if err == nil {
			if strings.HasPrefix(out, "unpacked") {
				r.opts.Logger.Info("skills copied into sandbox pod", "pod", pod, "bytes", tree.Len())
			}
			return nil
		}
		if !strings.Contains(err.Error(), "not running") && !strings.Contains(err.Error(), "not found") {
			return err
		}
	}
	return err
}

// execOnce runs cmd in the pod's container to its end, stdin from in, and
// returns its stdout; a non-zero exit is an error with its stderr.
func (r *Runtime) execOnce(ctx context.Context, pod, container string, cmd []string, in io.Reader) (string, error) {
	req := r.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container, Command: cmd,
			Stdin: in != nil, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(r.rest, http.MethodGet, req.URL().String())
	if err != nil {
		return "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(r.rest, http.MethodPost, req.URL())
	if err != nil {
		return "", err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: in, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("exec in %s/%s: %w: %s", pod, container, err, msg)
		}
		return "", fmt.Errorf("exec in %s/%s: %w", pod, container, err)
	}
	return stdout.String(), nil
}
