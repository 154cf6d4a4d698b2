package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"conch"
	"conch/coders"
	"conch/sandbox/sandboxd"
)

func (a *app) sandboxAgentCmd() *cobra.Command {
	var listen, keyFile string
	cmd := &cobra.Command{
		Use:    "sandbox-agent",
		Short:  "Run the in-sandbox agent on standard input and output, or on a unix socket (started by conch inside each sandbox)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listen == "" {
				return sandboxd.ServeStdio(cmd.Context())
			}
			if keyFile == "" {
				return errors.New("sandbox-agent --listen needs --key-file")
			}
			return sandboxd.ServeSocket(cmd.Context(), sandboxd.ListenOptions{Path: listen, KeyFile: keyFile})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "serve on this unix socket (each authenticated connection from outside the sandbox is a session)")
	cmd.Flags().StringVar(&keyFile, "key-file", "", "with --listen: the file holding the key clients prove (read, then removed)")
	return cmd
}

const refHelp = `REF is a container name, a prefix of its id (3 digits or more) or a
conversation key channel:id ("matrix:!room:example.org"). ` + "`conch sandbox ls`" + ` lists them.`

func (a *app) sandboxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Manage the sandboxes (one container per conversation)"}
	image := &cobra.Command{Use: "image", Short: "Manage the sandbox image"}
	var agents []string
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the sandbox image now (offline when no registry can be reached)",
		Long: `Build the sandbox image now (offline when no registry can be reached).

With --agents, the image with those coding-agent CLIs (` + strings.Join(coders.Builtin().Names(), ", ") + `)
is built on it from the npm registry's packages (pinned, checked, cached in
the cache dir): conch-sandbox-<agents>:<hash>. It prints the reference.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withRuntime(cmd.Context(), func(ctx context.Context, d *deps) error {
				progress := func(s string) { fmt.Fprintln(a.stderr, s) }
				rt, err := d.engineRuntime("sandbox image build")
				if err != nil {
					return err
				}
				if len(agents) == 0 {
					return rt.BuildImage(ctx, progress)
				}
				ref, err := rt.AgentImage(ctx, agents, progress)
				if err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, ref)
				return nil
			})
		},
	}
	build.Flags().StringSliceVar(&agents, "agents", nil, "coding-agent CLIs to add, comma separated: "+strings.Join(coders.Builtin().Names(), ", "))
	image.AddCommand(build, a.sandboxImagePushCmd())
	cmd.AddCommand(image, a.sandboxLsCmd(), a.sandboxInspectCmd(), a.sandboxExecCmd(), a.sandboxRmCmd(), a.sandboxPruneCmd())
	return cmd
}

func (a *app) sandboxLsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List this instance's sandboxes, warm-pool containers included",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withRuntime(cmd.Context(), func(ctx context.Context, d *deps) error {
				list, err := d.sandboxes().Sandboxes(ctx)
				if err != nil {
					return err
				}
				fillLastUsed(ctx, d, list, time.Now())
				if asJSON {
					return writeJSON(a.stdout, list)
				}
				writeSandboxTable(a.stdout, list, time.Now())
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// lastUseWindow is how far back the audit trail is read for last use.
const lastUseWindow = 30 * 24 * time.Hour

// fillLastUsed completes LastUsed from the audit trail: this process did
// not see the conversations' use, `conch up` did and audited each command
// and file write. The trail is read in pages, at most lastUseWindow back.
func fillLastUsed(ctx context.Context, d *deps, list []conch.SandboxInfo, now time.Time) {
	want := map[string]bool{}
	for _, s := range list {
		if !s.Key.IsZero() {
			want[s.Key.String()] = true
		}
	}
	if len(want) == 0 {
		return
	}
	last := map[string]time.Time{}
	const page = 2000
	since := now.Add(-lastUseWindow)
	for range 1000 {
		evs, err := d.db.AuditEvents(ctx, since, page)
		if err != nil {
			d.log.Warn("read the audit trail for last use", "err", err)
			return
		}
		for _, ev := range evs {
			k := ev.Conversation.String()
			if want[k] && (ev.Kind == conch.AuditExec || ev.Kind == conch.AuditFileWrite || ev.Kind == conch.AuditSandboxCreate) && ev.At.After(last[k]) {
				last[k] = ev.At
			}
		}
		if len(evs) < page {
			break
		}
		next := evs[len(evs)-1].At
		if !next.After(since) {
			next = since.Add(time.Millisecond) // a full page of one instant
		}
		since = next
	}
	for i := range list {
		if t := last[list[i].Key.String()]; !list[i].Key.IsZero() && t.After(list[i].LastUsed) {
			list[i].LastUsed = t
		}
	}
}

// writeSandboxTable renders `conch sandbox ls`.
func writeSandboxTable(w io.Writer, list []conch.SandboxInfo, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tCONVERSATION\tSTATE\tCREATED\tLAST USED\tIMAGE")
	for _, s := range list {
		convo := s.Conversation
		if convo == "" {
			convo = "(none)"
		}
		if s.Orphan {
			convo += " (orphan)"
		}
		last := "-"
		if !s.LastUsed.IsZero() {
			last = ago(now, s.LastUsed)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.ShortID(), convo, s.State, ago(now, s.Created), last, s.Freshness())
	}
	tw.Flush()
	if len(list) == 0 {
		fmt.Fprintln(w, "(no sandboxes)")
	}
}

func (a *app) sandboxInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect REF",
		Short: "Show one sandbox: state, hardening as the engine reports it, mounts, labels",
		Long:  "Show one sandbox: state, hardening as the engine reports it, mounts, labels.\n\n" + refHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withRuntime(cmd.Context(), func(ctx context.Context, d *deps) error {
				det, err := d.sandboxes().Inspect(ctx, args[0])
				if err != nil {
					return refHint(err)
				}
				one := []conch.SandboxInfo{det.SandboxInfo}
				fillLastUsed(ctx, d, one, time.Now())
				det.SandboxInfo = one[0]
				if asJSON {
					return writeJSON(a.stdout, det)
				}
				writeDetails(a.stdout, det, time.Now())
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// writeDetails renders `conch sandbox inspect`.
func writeDetails(w io.Writer, d conch.SandboxDetails, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Local().Format(time.RFC3339) + " (" + ago(now, t) + ")"
	}
	convo := d.Conversation
	if convo == "" {
		convo = "(none)"
	}
	if d.Orphan {
		convo += " (orphan: prune removes it)"
	}
	row("Name:", d.Name)
	row("ID:", d.ID)
	row("Conversation:", convo)
	state := d.State
	if !d.Running && d.FinishedAt.After(d.StartedAt) {
		state += fmt.Sprintf(" (exit code %d)", d.ExitCode)
	}
	row("State:", state)
	row("OOM-killed:", yesNo(d.OOMKilled))
	if d.Error != "" {
		row("Error:", d.Error)
	}
	row("Created:", when(d.Created))
	row("Started:", when(d.StartedAt))
	row("Finished:", when(d.FinishedAt))
	row("Last used:", when(d.LastUsed))
	if !d.AssignedFromPool.IsZero() {
		row("From warm pool:", when(d.AssignedFromPool))
	}
	fresh := "current"
	if !d.ImageCurrent {
		fresh = "stale"
	}
	row("Image:", fmt.Sprintf("%s (hash %s, %s)", d.Image, d.ImageHash, fresh))
	fresh = "current"
	if !d.ProfileCurrent {
		fresh = "stale"
	}
	row("Profile:", fmt.Sprintf("%s (%s)", d.ProfileHash, fresh))
	row("Engine:", d.Engine)
	ws := d.Workspace
	if ws == "" {
		ws = "(none)"
	}
	row("Workspace:", "volume "+ws)
	tw.Flush()

	fmt.Fprintln(w, "\nHardening (as the engine reports it):")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range d.Hardening {
		fmt.Fprintf(tw, "  %s\t%s\n", s.Name, s.Value)
	}
	tw.Flush()
	if len(d.HardeningProblems) == 0 {
		fmt.Fprintln(w, "  check: the active profile is in effect")
	} else {
		fmt.Fprintln(w, "  check: NOT as the active profile asks:")
		for _, p := range d.HardeningProblems {
			fmt.Fprintln(w, "    - "+p)
		}
	}

	fmt.Fprintln(w, "\nMounts:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, m := range d.Mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		fmt.Fprintf(tw, "  %s\t%s\t-> %s\t%s\n", m.Type, m.Source, m.Destination, mode)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nLabels:")
	for _, k := range slices.Sorted(maps.Keys(d.Labels)) {
		fmt.Fprintf(w, "  %s=%s\n", k, d.Labels[k])
	}
}

func (a *app) sandboxExecCmd() *cobra.Command {
	var timeout time.Duration
	var interactive bool
	cmd := &cobra.Command{
		Use:   "exec [--timeout D] [-i] REF [--] PROGRAM [ARG...]",
		Short: "Run a program in a sandbox the way the tools do (hardened, audited); exits with its exit code",
		Long: "Run a program in a sandbox through the same path as the tools: the container is started if it\n" +
			"stopped (or created for a conversation the store knows), the run is audited, and conch exits with\n" +
			"the program's exit code. Output (stdout and stderr together) is printed as it comes. Flags go\n" +
			"before REF; everything after REF is the program and its arguments.\n\n" + refHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, argv := args[0], args[1:]
			if len(argv) > 0 && argv[0] == "--" {
				argv = argv[1:]
			}
			if len(argv) == 0 {
				return fmt.Errorf("sandbox exec: no program given: conch sandbox exec %s -- PROGRAM [ARG...]", ref)
			}
			if timeout < 0 {
				return fmt.Errorf("sandbox exec: --timeout %s is negative", timeout)
			}
			return a.withRuntime(cmd.Context(), func(ctx context.Context, d *deps) error {
				return a.sandboxExec(ctx, d, ref, argv, timeout, interactive)
			})
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "kill the program after this long (0: no limit)")
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "pass standard input to the program")
	return cmd
}

func (a *app) sandboxExec(ctx context.Context, d *deps, ref string, argv []string, timeout time.Duration, interactive bool) error {
	key, err := d.runtime.KeyOf(ctx, ref)
	if err != nil {
		return refHint(err)
	}
	sb, err := d.runtime.Sandbox(ctx, key)
	if err != nil {
		return fmt.Errorf("sandbox exec: %w", err)
	}
	var mu sync.Mutex
	req := conch.ExecRequest{Argv: argv, Timeout: timeout, OnOutput: func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		a.stdout.Write(b)
	}}
	if interactive {
		req.Stdin = a.stdin
	}
	res, execErr := sb.Exec(ctx, req)
	detail := map[string]any{"by": "operator", "command": "conch sandbox exec", "container_id": sb.ID(), "argv": argv,
		"duration_ms": res.Duration.Milliseconds(), "exit_code": res.ExitCode, "stopped_reason": string(res.Stopped)}
	if execErr != nil {
		detail["exit_code"] = -1
		detail["error"] = execErr.Error()
	}
	if err := conch.RecordAudit(ctx, d.audit, time.Now(), conch.AuditExec, key, detail); err != nil {
		d.log.Error("audit operator exec", "err", err)
	}
	if execErr != nil {
		return fmt.Errorf("sandbox exec in %s: %w", key, execErr)
	}
	code := res.ExitCode
	switch res.Stopped {
	case conch.StoppedTimeout:
		fmt.Fprintf(a.stderr, "conch: %s: killed after the %s timeout\n", argv[0], timeout)
		code = 124
	case conch.StoppedOOM:
		fmt.Fprintf(a.stderr, "conch: %s: killed: the sandbox ran out of memory\n", argv[0])
	case conch.StoppedOutput:
		fmt.Fprintf(a.stderr, "conch: %s: killed: it printed more output than the sandbox allows\n", argv[0])
	case conch.StoppedCanceled:
		fmt.Fprintf(a.stderr, "conch: %s: canceled\n", argv[0])
		code = 130
	}
	if code == 0 && res.Stopped != conch.StoppedNone {
		code = 1
	}
	if code != 0 {
		if code < 0 || code > 255 {
			code = 1
		}
		return exitError{code: code}
	}
	return nil
}

func (a *app) sandboxRmCmd() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "rm REF",
		Short: "Remove a sandbox and its workspace (no questions asked)",
		Long: "Remove a sandbox's container and, unless --keep-workspace, its workspace volume. With\n" +
			"--keep-workspace the conversation gets a fresh container with its old workspace on next use.\n" +
			"On Kubernetes: the pod and its workspace claim (--keep-workspace: the pod only).\n\n" + refHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withRuntime(cmd.Context(), func(ctx context.Context, d *deps) error {
				removed, err := removeRef(ctx, d, args[0], keep)
				for _, r := range removed {
					fmt.Fprintln(a.stdout, "removed "+r)
				}
				return refHint(err)
			})
		},
	}
	cmd.Flags().BoolVar(&keep, "keep-workspace", false, "keep the workspace volume")
	return cmd
}

func (a *app) sandboxPruneCmd() *cobra.Command {
	var dry bool
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove orphaned and expired sandboxes and dangling workspaces",
		Long: "Remove the containers of conversations the store no longer knows (with their workspaces),\n" +
			"stopped or stale warm-pool containers, stopped containers past sandbox.retention or with a\n" +
			"stale image or profile (their workspaces stay), and workspace volumes no known conversation owns.\n" +
			"On Kubernetes: pods and claims of conversations the store no longer knows, failed pods (claims\n" +
			"stay), failed or stale warm-pool pods with their claims, and probe pods conch doctor left behind.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withRuntime(cmd.Context(), func(ctx context.Context, d *deps) error {
				pr, ok := d.runtime.(pruner)
				if !ok {
					return errors.New("sandbox prune: this sandbox backend has nothing to prune")
				}
				lines, err := pr.Prune(ctx, dry)
				verb := "removed "
				if dry {
					verb = "would remove "
				}
				for _, l := range lines {
					fmt.Fprintln(a.stdout, verb+l)
				}
				if len(lines) == 0 && err == nil {
					fmt.Fprintln(a.stdout, "nothing to prune")
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "only list what would be removed")
	return cmd
}

// refHint adds how to list the sandboxes to an unknown-ref error.
func refHint(err error) error {
	var re *conch.SandboxRefError
	if errors.As(err, &re) {
		return fmt.Errorf("%w; `conch sandbox ls` lists the sandboxes", err)
	}
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ago renders how long before now t was: "3m ago".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// sandboxes is the backend's operator view, all that ls and inspect read.
func (d *deps) sandboxes() conch.SandboxAdmin { return d.runtime }

// withRuntime runs fn with a connected runtime. It needs no model.
func (a *app) withRuntime(ctx context.Context, fn func(context.Context, *deps) error) error {
	cfg, err := a.loadOperatorConfig()
	if err != nil {
		return err
	}
	if cfg.Sandbox.Engine == "none" {
		return fmt.Errorf("sandbox.engine is none: there are no sandboxes")
	}
	d, err := a.build(ctx, cfg, a.stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := a.startRuntime(ctx, d, func(s string) { fmt.Fprintln(a.stderr, s) }); err != nil {
		return err
	}
	if d.runtime == nil {
		return fmt.Errorf("no container engine found: start dockerd or podman, or set sandbox.host")
	}
	return fn(ctx, d)
}
