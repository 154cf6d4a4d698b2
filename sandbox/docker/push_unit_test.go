package docker

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
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
	if h, err := (RegistryAuth{}).header("reg.example.org"); err != nil || h != "" {
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
