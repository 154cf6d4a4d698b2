package coders_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"conch/coders"
	"conch/config"
	"conch/egress"
	sandboximage "conch/images/sandbox"
	"conch/npmpin"
	"conch/terminal/coder"
)

func TestBuiltinTable(t *testing.T) {
	b := coders.Builtin()
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	if got := b.Names(); !slices.Equal(got, []string{"claude", "codex", "gemini"}) {
		t.Errorf("names %v, want claude, codex, gemini (the image's canonical order)", got)
	}
	for _, cli := range b {
		if _, err := coder.ProfileFor(cli); err != nil {
			t.Errorf("%s: %v", cli.Name, err)
		}
	}
	b[0].Image.Tarballs[0].Version = "changed"
	if coders.Builtin()[0].Image.Tarballs[0].Version == "changed" {
		t.Error("changing a returned table changed the pins")
	}
	if err := append(b, b[1]).Check(); err == nil {
		t.Error("a table naming a CLI twice passed Check")
	}
}

// fakeTarball is a gzipped npm tarball with one executable.
func fakeTarball(t *testing.T) []byte {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	body := "#!/bin/sh\necho aider 0.99\n"
	if err := tw.WriteHeader(&tar.Header{Name: "package/bin/aider", Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	io.WriteString(tw, body)
	tw.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw.Bytes())
	zw.Close()
	return gz.Bytes()
}

// TestAddingACLIIsOneEntry: a CLI that exists only in this test's table
// entry is accepted by the configuration, laid out in the sandbox image,
// gets its driver profile and its egress vendor, with nothing else
// written for it.
func TestAddingACLIIsOneEntry(t *testing.T) {
	tgz := fakeTarball(t)
	sum := sha512.Sum512(tgz)
	entry := coders.CLI{
		Name: "aider", Title: "Aider", Vendor: coders.OpenAI,
		KeyEnv: "OPENAI_API_KEY", BaseURLEnv: "OPENAI_API_BASE",
		Command: "aider --no-auto-commits", Driver: "claude",
		NoAsk: "it has no permission prompts",
		Image: npmpin.Install{
			Version: "0.99.0",
			Tarballs: []npmpin.Tarball{{Package: "@example/aider", Version: "0.99.0",
				Integrity: "sha512-" + base64.StdEncoding.EncodeToString(sum[:]), From: "package/", Dir: "aider"}},
			Link: npmpin.Dir + "/aider/bin/aider",
		},
	}
	table := append(coders.Builtin(), entry)
	if err := table.Check(); err != nil {
		t.Fatal(err)
	}

	// Configuration: valid against the table, unknown to the built-in one,
	// and its NoAsk refuses ask mode.
	dir := t.TempDir()
	file := filepath.Join(dir, "conch.toml")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(approvals string) *config.Config {
		c, err := config.Load(file, []string{"HOME=" + dir, "CONCH_DATA_DIR=" + dir, "CONCH_MODEL_PROVIDER=openai", "CONCH_MODEL=gpt-test", "CONCH_MODEL_API_KEY=k",
			"CONCH_CODER_AGENT=aider", "CONCH_CODER_API_KEY=k", "CONCH_CODER_APPROVALS=" + approvals})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := load("auto").ValidateWith(table); err != nil {
		t.Errorf("config with the entry: %v", err)
	}
	if err := load("auto").Validate(); err == nil || !strings.Contains(err.Error(), `coder.agent: unknown coding agent "aider"`) {
		t.Errorf("config without the entry: got %v, want coder.agent refused", err)
	}
	if err := load("ask").ValidateWith(table); err == nil || !strings.Contains(err.Error(), "coder.approvals: Aider cannot ask") || !strings.Contains(err.Error(), "it has no permission prompts") {
		t.Errorf("ask mode: got %v, want it refused with the entry's reason", err)
	}

	// Image: looked up, named, labelled and laid out.
	as, err := sandboximage.LookupAgentsIn(sandboximage.AgentsOf(table), []string{"aider", "claude"})
	if err != nil || len(as) != 2 || as[0].Name != "claude" || as[1].Name != "aider" {
		t.Fatalf("LookupAgentsIn: %v, %v; want claude, aider in the table's order", as, err)
	}
	hash := sandboximage.AgentsHash("base", as)
	if ref := sandboximage.AgentsRef(as, hash); ref != "conch-sandbox-claude-aider:"+hash {
		t.Errorf("ref %s", ref)
	}
	if l := sandboximage.AgentLabels(as[1:], hash); l[sandboximage.AgentVersionLabel("aider")] != "0.99.0" {
		t.Errorf("labels %v", l)
	}
	cache := t.TempDir()
	p := sandboximage.TarballPath(cache, entry.Image.Tarballs[0])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, tgz, 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := sandboximage.FetchAgents(context.Background(), sandboximage.FetchOptions{CacheDir: cache, Registry: "http://127.0.0.1:1"}, as[1:])
	if err != nil {
		t.Fatalf("fetch from the cache: %v", err)
	}
	var layer bytes.Buffer
	if err := sandboximage.WriteAgentsTar(context.Background(), &layer, as[1:], paths); err != nil {
		t.Fatal(err)
	}
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(&layer)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
	}
	if h := entries["usr/local/bin/aider"]; h == nil || h.Linkname != npmpin.Dir+"/aider/bin/aider" {
		t.Errorf("layer: no command link for aider (%v)", entries)
	}
	if h := entries["opt/conch-agents/aider/bin/aider"]; h == nil || h.Mode&0o111 == 0 {
		t.Errorf("layer: the package's executable is missing (%v)", entries)
	}
	cf, err := sandboximage.AgentsContainerfileFor(sandboximage.AgentsOf(table))
	if err != nil || !bytes.Contains(cf, []byte(entry.Image.Tarballs[0].URL(npmpin.DefaultRegistry))) || !bytes.Contains(cf, []byte("ln -s "+npmpin.Dir+"/aider/bin/aider")) {
		t.Errorf("Containerfile.agents for the table lacks aider (%v):\n%s", err, cf)
	}

	// Driver profile: the named driver with the entry's facts.
	prof, err := coder.ProfileFor(entry)
	if err != nil {
		t.Fatal(err)
	}
	if prof.Name != "aider" || prof.APIKeyEnv != "OPENAI_API_KEY" || prof.BaseURLEnv != "OPENAI_API_BASE" || prof.NoAsk != entry.NoAsk ||
		!strings.HasPrefix(prof.CommandLine(true, false), "aider --no-auto-commits ") {
		t.Errorf("profile %+v", prof)
	}
	if _, err := coder.ProfileFor(coders.CLI{Name: "x", Driver: "nope"}); err == nil {
		t.Error("an unknown driver was accepted")
	}

	// Egress: the entry's vendor is one the injector serves.
	in, err := egress.NewInjector(egress.InjectorOptions{Vendor: entry.Vendor, Key: "k"})
	if err != nil {
		t.Fatalf("injector for %s: %v", entry.Vendor, err)
	}
	in.Close()
}
