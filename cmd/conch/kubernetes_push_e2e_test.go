//go:build kubernetes

package main

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	sandboximage "conch/images/sandbox"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/kube"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// testRegistry serves an OCI registry (go-containerregistry's, in this
// process) on 127.0.0.1, where dockerd allows plain HTTP, wanting a login
// for everything as a private registry does.
func testRegistry(t *testing.T, user, pass string) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="conch-test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"log in"}]}`, http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestChatKubernetesImagePush: `conch sandbox image push` (the real binary, the
// test dockerd) sends the sandbox image and conch's own image to a real
// registry on 127.0.0.1 that wants a login; without one it fails and says
// so. The manifests read back with go-containerregistry's client are the
// ones conch printed, conch's image holds the agent binary, and `conch
// chat` configured with the printed lines runs a command in a pod the test
// node started from images it pulled from that registry (with the
// imagePullSecret the namespace's service account carries).
func TestChatKubernetesImagePush(t *testing.T) {
	e := kube.Sandboxes(t)
	const user, pass = "ci", "s3cret-push-pw"
	host := testRegistry(t, user, pass)
	dest := host + "/conch"
	srv := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "k8sp" + hex.EncodeToString(buf)
	env := append(testEnv(srv, fakellm.OpenAI, dir), kubeEnv(e, instance)...)
	// The engine to push from (sandbox.backend stays "kubernetes").
	env = append(env, "CONCH_SANDBOX_HOST="+e.Engine.Host, "CONCH_SANDBOX_CACHE_DIR="+e.Engine.CacheDir,
		"CONCH_SANDBOX_SANDBOXD_BINARY="+engine.SandboxdBinary(t))

	_, errOut, code := conchRun(t, env, "sandbox image push "+dest)
	if code == 0 || !strings.Contains(errOut, dest+"/") {
		t.Fatalf("push without a login: exit %d, want a failure naming the image:\n%s", code, errOut)
	}
	t.Logf("without a login: %s", lastLine(errOut))
	_, errOut, code = conchRunStdin(t, env, "sandbox image push "+dest+" --username "+user+" --password-stdin", "wrong\n")
	if code == 0 {
		t.Fatalf("push with a wrong password succeeded:\n%s", errOut)
	}
	out, errOut, code := conchRunStdinWithin(t, env, "sandbox image push "+dest+" --username "+user+" --password-stdin", pass+"\n", 8*time.Minute)
	if code != 0 {
		t.Fatalf("push: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("printed:\n%s", out)
	sandboxRef := tomlValue(t, out, "image")
	agentRef := tomlValue(t, out, "agent_image")
	if !strings.HasPrefix(sandboxRef, dest+"/conch-sandbox:") || !strings.HasPrefix(agentRef, dest+"/conch-agent-test:") {
		t.Fatalf("refs %q, %q: want under %s", sandboxRef, agentRef, dest)
	}
	if strings.Contains(out, pass) || strings.Contains(errOut, pass) {
		t.Fatal("the password was printed")
	}

	login := remote.WithAuth(&authn.Basic{Username: user, Password: pass})
	for _, ref := range []string{sandboxRef, agentRef} {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Get(r, login)
		if err != nil {
			t.Fatalf("read %s back: %v", ref, err)
		}
		if want := "pushed " + ref + " (" + desc.Digest.String() + ")"; !strings.Contains(errOut, want) {
			t.Fatalf("conch did not report the registry's digest: want %q in\n%s", want, errOut)
		}
		img, err := desc.Image()
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if ref == sandboxRef {
			if cf.Config.Labels[sandboximage.HashLabel] == "" {
				t.Fatalf("sandbox image config has no conch labels: %+v", cf.Config.Labels)
			}
			continue
		}
		ls, err := img.Layers()
		if err != nil || len(ls) != 1 {
			t.Fatalf("agent image layers: %d, %v", len(ls), err)
		}
		size := fileInLayer(t, ls[0], "conch")
		st, err := os.Stat(engine.SandboxdBinary(t))
		if err != nil || size != st.Size() {
			t.Fatalf("agent image's /conch is %d bytes, the binary %d (%v)", size, st.Size(), err)
		}
	}

	// The node must pull: the engine loses the pushed names (the images
	// stay under their own), and the namespace's default service account
	// gets the registry login, which the API server copies into every pod.
	ctx := context.Background()
	dc := e.Engine.Client(t)
	for _, ref := range []string{sandboxRef, agentRef} {
		if _, err := dc.ImageRemove(ctx, ref, client.ImageRemoveOptions{}); err != nil {
			t.Fatalf("untag %s: %v", ref, err)
		}
	}
	cfgJSON, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))}}})
	if _, err := e.Client.CoreV1().Secrets(e.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: cfgJSON}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Secrets(e.Namespace).Delete(context.Background(), "regcred", metav1.DeleteOptions{})
		_, _ = e.Client.CoreV1().ServiceAccounts(e.Namespace).Patch(context.Background(), "default", types.MergePatchType,
			[]byte(`{"imagePullSecrets":null}`), metav1.PatchOptions{})
	})
	if _, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Patch(ctx, "default", types.MergePatchType,
		[]byte(`{"imagePullSecrets":[{"name":"regcred"}]}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	env = append(env, "CONCH_SANDBOX_IMAGE="+sandboxRef, "CONCH_SANDBOX_KUBERNETES_AGENT_IMAGE="+agentRef)
	// The command runs through the agent that came with the pulled agent
	// image, in the pulled sandbox image.
	srv.Push(fakellm.ToolCall("bash", `{"command":"id -u"}`), fakellm.Text("Ran."))
	p := startConch(t, env, "chat")
	if got := p.sayWithin(t, "run it", 4*time.Minute); got != "Ran." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)
	if res := lastToolResult(t, srv); !strings.Contains(res, "1000") {
		t.Fatalf("bash in the pod from the pulled images: %q", res)
	}
	for _, ref := range []string{sandboxRef, agentRef} {
		if _, err := dc.ImageInspect(ctx, ref); err != nil {
			t.Fatalf("%s was not pulled by the node: %v", ref, err)
		}
	}

	// With coder.agent the image sandboxes use is the one with the CLI
	// (built in the engine as conch builds it; shared with
	// TestChatKubernetesCode): it is sandbox.image, its base goes too.
	claude := claudeImage(t, e.Engine)
	out, errOut, code = conchRunStdinWithin(t, append(env, "CONCH_CODER_AGENT=claude", "CONCH_SANDBOX_IMAGE="+kube.SandboxImage),
		"sandbox image push "+dest+" --username "+user+" --password-stdin", pass+"\n", 8*time.Minute)
	if code != 0 {
		t.Fatalf("push with coder.agent: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("printed with coder.agent = claude:\n%s", out)
	coderRef := tomlValue(t, out, "image")
	if want := dest + "/" + claude; coderRef != want || !strings.Contains(out, "# with claude ") ||
		!strings.Contains(out, `(coder.agent = "claude")`) || !strings.Contains(out, `# without the coding CLIs: "`+sandboxRef+`"`) {
		t.Fatalf("image %q, want %q with the CLI named and the base %s", coderRef, want, sandboxRef)
	}
	r, err := name.ParseReference(coderRef)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, login)
	if err != nil {
		t.Fatalf("read %s back: %v", coderRef, err)
	}
	if cf, err := img.ConfigFile(); err != nil || cf.Config.Labels[sandboximage.AgentsLabel] != "claude" {
		t.Fatalf("%s config: %v %+v", coderRef, err, cf)
	}
	if _, err := dc.ImageRemove(ctx, coderRef, client.ImageRemoveOptions{}); err != nil {
		t.Fatalf("untag %s: %v", coderRef, err)
	}
}

// tomlValue reads `key = "value"` from conch's printed config lines.
func tomlValue(t *testing.T, out, key string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + ` = "([^"]+)"`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s line in:\n%s", key, out)
	}
	return m[1]
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// fileInLayer returns the size of the regular file path in a layer.
func fileInLayer(t *testing.T, l interface{ Uncompressed() (io.ReadCloser, error) }, path string) int64 {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("no %s in the layer", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "./") == path && h.Typeflag == tar.TypeReg {
			return h.Size
		}
	}
}
