package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"iter"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
)

func TestParseRegistry(t *testing.T) {
	for in, want := range map[string]string{
		"registry.example.org/conch": "registry.example.org/conch",
		"127.0.0.1:5000/":            "127.0.0.1:5000",
		"localhost/team/conch":       "localhost/team/conch",
		" ghcr.io/acme ":             "ghcr.io/acme",
	} {
		if got, err := ParseRegistry(in); err != nil || got != want {
			t.Errorf("ParseRegistry(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, says := range map[string]string{
		"":                                 "no registry",
		"conch":                            "registry host",
		"https://registry.example.org":     "without a scheme",
		"registry.example.org/Conch":       "registry.example.org/Conch",
		"registry.example.org/conch:v1":    "registry.example.org/conch:v1",
		"registry.example.org/conch@sha25": "registry.example.org/conch@sha25",
	} {
		if _, err := ParseRegistry(in); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseRegistry(%q): %v, want an error saying %q", in, err, says)
		}
	}
}

func TestPushTarget(t *testing.T) {
	id := "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for src, want := range map[string]string{
		"conch-sandbox:latest":                   "reg.example.org/x/conch-sandbox:0123456789ab",
		"conch-sandbox":                          "reg.example.org/x/conch-sandbox:0123456789ab",
		"conch-sandbox-claude:5f3a9c":            "reg.example.org/x/conch-sandbox-claude:5f3a9c",
		"old.example.org/team/conch:v1.2.3":      "reg.example.org/x/conch:v1.2.3",
		"127.0.0.1:5000/conch/conch-sandbox:abc": "reg.example.org/x/conch-sandbox:abc",
	} {
		if got, err := PushTarget("reg.example.org/x", src, id); err != nil || got != want {
			t.Errorf("PushTarget(%q) = %q, %v; want %q", src, got, err, want)
		}
	}
	if _, err := PushTarget("reg.example.org", "conch:latest", ""); err == nil {
		t.Error("a latest tag without an image id was accepted")
	}
}

func TestRegistryAuthHeader(t *testing.T) {
	if h, err := (RegistryAuth{}).header("reg.example.org"); err != nil || h != "e30=" {
		t.Fatalf("no login: %q, %v", h, err)
	}
	h, err := RegistryAuth{Username: "ci", Password: "p+/=ss"}.header("reg.example.org")
	if err != nil {
		t.Fatal(err)
	}
	b, err := base64.URLEncoding.DecodeString(h)
	if err != nil {
		t.Fatalf("not base64url: %v", err)
	}
	var got map[string]string
	if err := json.Unmarshal(b, &got); err != nil || got["username"] != "ci" || got["password"] != "p+/=ss" || got["serveraddress"] != "reg.example.org" {
		t.Fatalf("X-Registry-Auth decodes to %s (%v)", b, err)
	}
}

// pushEngine answers ImageTag and ImagePush with a canned progress stream.
type pushEngine struct {
	*fakeEngine
	stream string
	tagged []string
	auth   string
}

func (p *pushEngine) ImageTag(_ context.Context, o client.ImageTagOptions) (client.ImageTagResult, error) {
	p.tagged = append(p.tagged, o.Source+" "+o.Target)
	return client.ImageTagResult{}, nil
}

func (p *pushEngine) ImagePush(_ context.Context, _ string, o client.ImagePushOptions) (client.ImagePushResponse, error) {
	p.auth = o.RegistryAuth
	return pushStream{io.NopCloser(strings.NewReader(p.stream))}, nil
}

type pushStream struct{ io.ReadCloser }

func (s pushStream) JSONMessages(context.Context) iter.Seq2[jsonstream.Message, error] {
	return func(yield func(jsonstream.Message, error) bool) {
		dec := json.NewDecoder(s)
		for {
			var m jsonstream.Message
			if err := dec.Decode(&m); err == io.EOF {
				return
			} else if !yield(m, err) || err != nil {
				return
			}
		}
	}
}

func (s pushStream) Wait(context.Context) error { return nil }

// TestPushReports: the digest comes from the engine's aux message, layer
// lines reach progress once each, an error in the stream is the push's
// error, and a login reaches the engine as X-Registry-Auth for the
// registry's host.
func TestPushReports(t *testing.T) {
	f := &pushEngine{fakeEngine: newFakeEngine(), stream: `{"status":"The push refers to repository [reg.example.org:5000/x/conch-sandbox]"}
{"status":"Preparing","id":"a1"}
{"status":"Pushing","id":"a1","progressDetail":{"current":1,"total":2}}
{"status":"Pushed","id":"a1"}
{"status":"0123456789ab: digest: sha256:feed size: 527"}
{"aux":{"Tag":"0123456789ab","Digest":"sha256:feed","Size":527}}
`}
	r := newFakeRuntime(t, f.fakeEngine)
	r.api = f
	var lines []string
	img, err := r.Push(context.Background(), PushImage{Source: "conch-sandbox:latest", Target: "reg.example.org:5000/x/conch-sandbox:0123456789ab"},
		RegistryAuth{Username: "ci", Password: "pw"}, func(s string) { lines = append(lines, s) })
	if err != nil || img.Digest != "sha256:feed" || img.Size != 527 {
		t.Fatalf("push: %+v, %v", img, err)
	}
	if len(f.tagged) != 1 || f.tagged[0] != "conch-sandbox:latest reg.example.org:5000/x/conch-sandbox:0123456789ab" {
		t.Fatalf("tagged %q", f.tagged)
	}
	if strings.Join(lines, "|") != "The push refers to repository [reg.example.org:5000/x/conch-sandbox]|a1: Pushed|0123456789ab: digest: sha256:feed size: 527" {
		t.Fatalf("progress %q", lines)
	}
	b, _ := base64.URLEncoding.DecodeString(f.auth)
	if !strings.Contains(string(b), `"serveraddress":"reg.example.org:5000"`) {
		t.Fatalf("X-Registry-Auth %s", b)
	}

	f.stream = `{"status":"Preparing","id":"a1"}
{"errorDetail":{"message":"unauthorized: authentication required"},"error":"unauthorized: authentication required"}
`
	if _, err := r.Push(context.Background(), PushImage{Source: "a:b", Target: "reg.example.org/x/a:b"}, RegistryAuth{}, nil); err == nil ||
		!strings.Contains(err.Error(), "push reg.example.org/x/a:b: unauthorized: authentication required") {
		t.Fatalf("a refused push: %v", err)
	}
	if f.auth != "e30=" {
		t.Fatalf("no login: X-Registry-Auth %q, want the empty config e30=", f.auth)
	}
	f.stream = `{"status":"Pushed","id":"a1"}
`
	if _, err := r.Push(context.Background(), PushImage{Source: "a:b", Target: "reg.example.org/x/a:b"}, RegistryAuth{}, nil); err == nil ||
		!strings.Contains(err.Error(), "no digest") {
		t.Fatalf("a push without a digest: %v", err)
	}
}
