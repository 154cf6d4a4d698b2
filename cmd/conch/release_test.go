package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv"
)

// TestPlainBuildIsComplete: `go build ./cmd/conch` without tags or cgo gives
// the binary with Matrix end-to-end encryption; the linker stamps are what
// `conch version` prints (CI builds with -buildvcs=false); the SBOM of that
// binary lists the modules linked in, mautrix with its replacement.
func TestPlainBuildIsComplete(t *testing.T) {
	testenv.Short(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go", "the test builds conch with the go command")
	}
	bin := filepath.Join(t.TempDir(), "conch")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goBin, "build", "-buildvcs=false",
		"-ldflags", "-X main.version=v9.8.7 -X main.commit=0123abcd -X main.date=2026-11-26T01:02:03Z",
		"-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/conch: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("conch version: %v", err)
	}
	want := "conch v9.8.7 (commit 0123abcd, built 2026-11-26T01:02:03Z, " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ", matrix e2ee)"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("conch version:\n got %s\nwant %s", got, want)
	}

	sbom, err := exec.CommandContext(ctx, goBin, "run", "../../internal/release/sbom", "-date", "2026-11-26T01:02:03Z", bin).Output()
	if err != nil {
		t.Fatalf("sbom: %v", err)
	}
	var doc struct {
		BOMFormat, SpecVersion string
		Metadata               struct {
			Component struct{ Name, Version string }
		}
		Components []struct {
			Name, Version, PURL string
			Hashes              []struct{ Alg, Content string }
			Properties          []struct{ Name, Value string }
		}
	}
	if err := json.Unmarshal(sbom, &doc); err != nil {
		t.Fatalf("sbom is not JSON: %v", err)
	}
	if doc.BOMFormat != "CycloneDX" || doc.SpecVersion != "1.5" || doc.Metadata.Component.Name != "conch" || doc.Metadata.Component.Version != "v9.8.7" {
		t.Fatalf("sbom header: %s %s %+v", doc.BOMFormat, doc.SpecVersion, doc.Metadata)
	}
	found := map[string]bool{}
	for _, c := range doc.Components {
		found[c.Name] = true
		switch c.Name {
		case "maunium.net/go/mautrix":
			if len(c.Properties) == 0 || c.Properties[0].Value != "./third_party/mautrix" {
				t.Errorf("mautrix component does not name its replacement: %+v", c)
			}
		case "modernc.org/sqlite":
			if len(c.Hashes) != 1 || len(c.Hashes[0].Content) != 64 || c.PURL != "pkg:golang/modernc.org/sqlite@"+c.Version {
				t.Errorf("sqlite component: %+v", c)
			}
		}
	}
	for _, m := range []string{"go", "maunium.net/go/mautrix", "modernc.org/sqlite", "github.com/spf13/cobra"} {
		if !found[m] {
			t.Errorf("sbom lacks %s", m)
		}
	}
}

// TestOperatorCommandsReadTheServiceEnvFile: with the data dir (and the
// model's key) only in the service's environment file, operator commands in
// a shell that has neither find the service's data dir; a variable set in
// the shell wins over the file; a malformed file is refused without showing
// its text.
func TestOperatorCommandsReadTheServiceEnvFile(t *testing.T) {
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "config", "conch")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	svcData := filepath.Join(dir, "service-data")
	envFile := "# written by conch init\nCONCH_DATA_DIR=" + svcData + "\nCONCH_MODEL_PROVIDER=openai\nCONCH_MODEL=gpt-test\nCONCH_MODEL_API_KEY='sk-only-the-service-has-it'\nCONCH_SANDBOX_ENGINE=none\n"
	if err := os.WriteFile(filepath.Join(cfgDir, envFileName), []byte(envFile), 0o600); err != nil {
		t.Fatal(err)
	}
	var shell []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONCH_") {
			shell = append(shell, kv)
		}
	}
	shell = append(shell, "CONCH_TEST_AS_MAIN=1", "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))

	webURL(t, shell)
	if _, err := os.Stat(filepath.Join(svcData, storeFile)); err != nil {
		t.Fatalf("conch web url did not use the service's data dir: %v", err)
	}
	for _, args := range []string{"doctor --offline", "schedules list", "usage", "pairing list", "backup " + filepath.Join(dir, "b.db")} {
		out, errOut, code := conchRun(t, shell, args)
		if code != 0 {
			t.Errorf("conch %s: exit %d\n%s%s", args, code, out, errOut)
		}
		if strings.Contains(out+errOut, "sk-only-the-service-has-it") {
			t.Errorf("conch %s printed the key", args)
		}
	}
	out, _, _ := conchRun(t, shell, "doctor --offline")
	if !strings.Contains(out, svcData+" is writable") || !strings.Contains(out, "not contacted (--offline)") {
		t.Errorf("doctor --offline:\n%s", out)
	}

	shellData := filepath.Join(dir, "shell-data")
	if _, _, code := conchRun(t, append(shell, "CONCH_DATA_DIR="+shellData), "backup "+filepath.Join(dir, "c.db")); code != 0 {
		t.Fatal("backup with the shell's data dir failed")
	}
	if _, err := os.Stat(filepath.Join(shellData, storeFile)); err != nil {
		t.Fatalf("the shell's CONCH_DATA_DIR did not win over the env file: %v", err)
	}

	bad := "CONCH_MODEL_API_KEY=fine\nsk-a-pasted-secret-without-a-name\n"
	if err := os.WriteFile(filepath.Join(cfgDir, envFileName), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := conchRun(t, shell, "web url")
	if code == 0 || !strings.Contains(errOut, "line 2 is not KEY=value") || strings.Contains(out+errOut, "sk-a-pasted") {
		t.Fatalf("malformed env file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestReadEnvFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "conch.env")
	os.WriteFile(p, []byte("\n# comment\n; also\nA=1\n B = two words \nC=\"quoted = x\"\nD='single'\nE=\nF=\"unbalanced\n"), 0o600)
	got, err := readEnvFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=1", "B=two words", "C=quoted = x", "D=single", "E=", "F=\"unbalanced"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
	if env, err := readEnvFile(filepath.Join(t.TempDir(), "missing")); err != nil || env != nil {
		t.Fatalf("missing file: %v %v", env, err)
	}
}
