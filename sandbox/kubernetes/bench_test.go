//go:build kubernetes

package kubernetes_test

import (
	"context"
	"io"
	"testing"

	"conch"
	"conch/internal/testenv/kube"
	"conch/sandbox/kubernetes"
	"conch/sandbox/sandboxd"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkExecRoundTrip runs one short program (`true`) through the
// in-sandbox agent of a pod: over the exec stream through the API server
// and the node (what conch does: "apiserver"), and through the same agent
// binary in the same container over a direct engine exec ("engine", the
// Docker backend's path: the baseline, in the same run).
//
//	go test -tags kubernetes -run '^$' -bench ExecRoundTrip ./sandbox/kubernetes/
func BenchmarkExecRoundTrip(b *testing.B) {
	e := env{kube.Sandboxes(b)}
	ctx := context.Background()
	o := e.options(b, nil)
	rt, err := kubernetes.New(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	key := conch.ConversationKey{Channel: "bench", ID: "1"}
	sb, err := rt.Sandbox(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	p, err := e.Client.CoreV1().Pods(ns).Get(ctx, kubernetes.PodName(o.InstanceID, key), metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	direct := sandboxd.NewClient(directDial(e.Engine.Client(b), e.Node.ContainerID(p.UID, kubernetes.SandboxContainer)), sandboxd.ClientOptions{})
	defer direct.Close()
	req := conch.ExecRequest{Argv: []string{"true"}}
	for _, c := range []struct {
		name string
		sb   conch.Sandbox
	}{{"apiserver", sb}, {"engine", direct}} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := c.sb.Exec(ctx, req); err != nil { // the stream is open before the clock runs
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if res, err := c.sb.Exec(ctx, req); err != nil || res.ExitCode != 0 {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}

// directDial attaches the agent in container id through the engine.
func directDial(api *client.Client, id string) sandboxd.DialFunc {
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		ex, err := api.ExecCreate(ctx, id, client.ExecCreateOptions{AttachStdin: true, AttachStdout: true, AttachStderr: true,
			Cmd: []string{kubernetes.AgentDir + "/conch", "sandbox-agent"}})
		if err != nil {
			return nil, err
		}
		hr, err := api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		go func() {
			_, err := stdcopy.StdCopy(pw, io.Discard, hr.Reader)
			pw.CloseWithError(err)
		}()
		return &rwc{r: pr, w: hr.Conn, close: func() { hr.Close(); pr.Close() }}, nil
	}
}

type rwc struct {
	r     io.Reader
	w     io.Writer
	close func()
}

func (c *rwc) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *rwc) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *rwc) Close() error                { c.close(); return nil }
