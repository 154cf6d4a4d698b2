package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"conch/config"
)

func TestBaseURL(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct {
		listen, public, cert string
		want                 string
	}{
		{"127.0.0.1:8484", "", "", "http://127.0.0.1:8484"},
		{"[::1]:9000", "", "", "http://[::1]:9000"},
		{"0.0.0.0:8484", "", "c.pem", "https://" + host + ":8484"},
		{":8484", "", "", "http://" + host + ":8484"},
		{"127.0.0.1:8484", "https://conch.example.org/", "", "https://conch.example.org"},
	} {
		cfg := &config.Config{Gateway: config.GatewayConfig{Listen: tc.listen}, Web: config.WebConfig{PublicURL: tc.public, TLSCert: tc.cert}}
		if got := baseURL(cfg); got != tc.want {
			t.Errorf("baseURL(%q, %q) = %q, want %q", tc.listen, tc.public, got, tc.want)
		}
	}
}

// TestServeTLS: with web.tls_cert and web.tls_key the HTTP host speaks
// HTTPS only.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	h, err := newHTTPHost("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Web: config.WebConfig{TLSCert: certFile, TLSKey: keyFile}}
	if err := serveTLS(h, cfg); err != nil {
		t.Fatal(err)
	}
	h.Serve()
	defer h.Shutdown(context.Background())
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get("https://" + h.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.TLS == nil || strings.TrimSpace(string(b)) != "ok" {
		t.Fatalf("https: tls %v body %q", resp.TLS != nil, b)
	}
	if resp, err := c.Get("http://" + h.Addr() + "/healthz"); err == nil && resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		t.Fatal("plain HTTP answered on a TLS listener")
	}
	cfg.Web.TLSKey = filepath.Join(dir, "missing.pem")
	if err := serveTLS(h, cfg); err == nil || !strings.Contains(err.Error(), "web.tls_cert") {
		t.Fatalf("bad key: %v, want an error naming web.tls_cert/web.tls_key", err)
	}
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestWebSecure: behind a TLS reverse proxy (web.public_url https) or with
// conch's own TLS the session cookie is Secure (and HSTS is sent).
func TestWebSecure(t *testing.T) {
	for _, tc := range []struct {
		public, cert string
		want         bool
	}{
		{"", "", false},
		{"http://conch.lan:8484", "", false},
		{"https://conch.example.org/", "", true},
		{"HTTPS://conch.example.org", "", true},
		{"", "c.pem", true},
	} {
		cfg := &config.Config{Web: config.WebConfig{PublicURL: tc.public, TLSCert: tc.cert, TLSKey: tc.cert}}
		if got := webSecure(cfg); got != tc.want {
			t.Errorf("webSecure(public_url %q, tls_cert %q) = %v, want %v", tc.public, tc.cert, got, tc.want)
		}
	}
}

// `conch web url` and `conch web logout-all` never talk to the model: they
// work in a shell without the model's settings (where only the service has
// the key).
func TestWebCommandsWithoutModel(t *testing.T) {
	dir := t.TempDir()
	env := append(os.Environ(),
		"CONCH_TEST_AS_MAIN=1",
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"CONCH_DATA_DIR="+filepath.Join(dir, "data"),
		"CONCH_MODEL_PROVIDER=", "CONCH_MODEL=", "CONCH_MODEL_API_KEY=",
		"OPENAI_API_KEY=", "ANTHROPIC_API_KEY=", "GEMINI_API_KEY=",
		"CONCH_GATEWAY_LISTEN=127.0.0.1:8484",
	)
	link := webURL(t, env)
	if !strings.HasPrefix(link, "http://127.0.0.1:8484/login?token=") {
		t.Fatalf("link %q", link)
	}
	if out, errOut, code := conchRun(t, env, "web logout-all"); code != 0 || !strings.Contains(out, "Every web session has ended") {
		t.Fatalf("logout-all: exit %d, %q, %q", code, out, errOut)
	}
}
