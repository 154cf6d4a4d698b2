package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"conch"
	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"
	"conch/sqlite"
)

// conchRun runs the test binary as `conch <args>` (split on spaces) and
// returns its stdout, stderr and exit code.
func conchRun(t testing.TB, env []string, args string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(env, "CONCH_TEST_ARGS="+args)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("conch %s: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// seedConversation records an inbound message so that the store knows key.
func seedConversation(t *testing.T, dataDir string, key conch.ConversationKey) {
	t.Helper()
	ctx := context.Background()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(ctx, filepath.Join(dataDir, "conch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	turn, _, err := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "operator", Text: "hello", ReceivedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.FinishTurn(ctx, turn.ID, conch.TurnDone, ""); err != nil {
		t.Fatal(err)
	}
}

// TestSandboxCommands drives `conch sandbox ls | exec | inspect | prune | rm`
// as a process against a real engine, with no model configured.
func TestSandboxCommands(t *testing.T) {
	testenv.Short(t)
	engine.Each(t, func(t *testing.T, e *engine.Engine) {
		dir := t.TempDir()
		dataDir := filepath.Join(dir, "data")
		buf := make([]byte, 4)
		rand.Read(buf)
		instance := "e2e" + hex.EncodeToString(buf)
		env := append(os.Environ(),
			"CONCH_TEST_AS_MAIN=1",
			"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
			"CONCH_DATA_DIR="+dataDir,
			"CONCH_MODEL=", "CONCH_MODEL_API_KEY=", "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=", "GEMINI_API_KEY=",
			"CONCH_SANDBOX_DISK=0",
		)
		env = append(env, engineEnv(t, e, instance)...)
		api := e.Client(t)
		containers := instanceContainers(t, api, instance)
		t.Cleanup(func() {
			vols, err := api.VolumeList(context.Background(), client.VolumeListOptions{
				Filters: make(client.Filters).Add("label", docker.LabelInstance+"="+instance)})
			if err == nil {
				for _, v := range vols.Items {
					api.VolumeRemove(context.Background(), v.Name, client.VolumeRemoveOptions{Force: true})
				}
			}
		})
		dumpLogsOnFailure(t, dataDir)
		key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "ops"}
		seedConversation(t, dataDir, key)
		name := docker.ContainerName(instance, key)

		if out, errOut, code := conchRun(t, env, "sandbox ls"); code != 0 || !strings.Contains(out, "(no sandboxes)") {
			t.Fatalf("ls before any sandbox: exit %d, stdout %q, stderr %q", code, out, errOut)
		}

		for _, tc := range []struct {
			args       string
			code       int
			stdout     string
			stderrWant string
		}{
			{"sandbox exec cli:ops -- echo hello", 0, "hello\n", ""},
			{"sandbox exec cli:ops python3 -c exit(3)", 3, "", ""},
			{"sandbox exec " + name + " -- sh -c exit", 0, "", ""},
			{"sandbox exec --timeout 1s cli:ops -- sleep 60", 124, "", "timeout"},
			{"sandbox exec nosuch -- true", 1, "", "conch sandbox ls"},
			{"sandbox exec cli:ops", 1, "", "no program given"},
		} {
			t.Run(tc.args, func(t *testing.T) {
				out, errOut, code := conchRun(t, env, tc.args)
				if code != tc.code || out != tc.stdout || !strings.Contains(errOut, tc.stderrWant) {
					t.Errorf("got exit %d stdout %q stderr %q; want exit %d stdout %q stderr containing %q",
						code, out, errOut, tc.code, tc.stdout, tc.stderrWant)
				}
			})
		}
		if ids := containers(); len(ids) != 1 {
			t.Fatalf("containers after exec: %v, want one", ids)
		}
		audit, err := os.ReadFile(filepath.Join(dataDir, "logs", "audit.jsonl"))
		if err != nil || !strings.Contains(string(audit), `operator`) || !strings.Contains(string(audit), `"exec"`) {
			t.Errorf("audit trail lacks the operator's exec (%v):\n%s", err, audit)
		}

		out, errOut, code := conchRun(t, env, "sandbox ls")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") {
			t.Fatalf("ls: exit %d, stdout %q, stderr %q; want a header and one row", code, out, errOut)
		}
		if f := strings.Fields(lines[1]); len(f) < 4 || f[0] != name || f[2] != key.String() || f[3] != "running" || !strings.HasSuffix(lines[1], "current") {
			t.Errorf("ls row %q, want %s, its id, %s, running … current", lines[1], name, key)
		}

		out, _, code = conchRun(t, env, "sandbox ls --json")
		var list []conch.SandboxInfo
		if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 || len(list) != 1 || list[0].Name != name || !list[0].Running {
			t.Fatalf("ls --json: exit %d, %v, %+v; want one running %s", code, err, list, name)
		}
		if last := list[0].LastUsed; time.Since(last) > time.Minute {
			t.Errorf("ls --json: last used %v, want the time of the last exec (from the audit trail)", last)
		}

		out, errOut, code = conchRun(t, env, "sandbox inspect cli:ops")
		for _, want := range []string{"Name:", name, "Hardening (as the engine reports it):", "read-only root", "init user", "1001:1001",
			"check: the active profile is in effect", "/workspace", docker.LabelInstance + "=" + instance} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("inspect: exit %d, stderr %q; stdout lacks %q:\n%s", code, errOut, want, out)
			}
		}
		out, _, code = conchRun(t, env, "sandbox inspect --json "+name)
		var det conch.SandboxDetails
		if err := json.Unmarshal([]byte(out), &det); err != nil || code != 0 || det.Name != name || len(det.Hardening) == 0 {
			t.Errorf("inspect --json: exit %d, %v, %+v", code, err, det)
		}

		if out, errOut, code := conchRun(t, env, "sandbox prune --dry-run"); code != 0 || out != "nothing to prune\n" {
			t.Errorf("prune --dry-run: exit %d, stdout %q, stderr %q; want nothing to prune", code, out, errOut)
		}

		out, errOut, code = conchRun(t, env, "sandbox rm cli:ops")
		if want := "removed container " + name + "\nremoved volume " + name + "\n"; code != 0 || out != want {
			t.Errorf("rm: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
		}
		if ids := containers(); len(ids) != 0 {
			t.Errorf("containers after rm: %v, want none", ids)
		}
		if _, err := api.VolumeInspect(context.Background(), name, client.VolumeInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("workspace after rm: got %v, want gone", err)
		}
		if _, errOut, code := conchRun(t, env, "sandbox rm cli:ops"); code != 1 || !strings.Contains(errOut, "nothing to remove") {
			t.Errorf("rm again: exit %d, stderr %q; want exit 1 and nothing to remove", code, errOut)
		}
	})
}
