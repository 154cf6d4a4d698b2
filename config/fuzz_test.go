package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad reads config files as a person may write them: a file that does
// not decode is an error naming the file, never a panic, and one that loads
// either validates or says which keys are wrong. `go test` runs the seeds
// (the embedded defaults among them) and testdata/fuzz; `make fuzz`
// explores further.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		string(Default()),
		"[model]\nprovider = \"anthropic\"\nname = \"claude\"\napi_key = \"k\"\n",
		"[model]\nprovider = \"nope\"\n[agent]\nmax_steps = -1\n",
		"[gateway]\ntypo_key = 1\n",
		"[tools]\nweb_fetch_timeout = \"forever\"\n",
		"[tools]\nweb_fetch_timeout = 20\n",
		"[sandbox]\nmemory = \"1.5.3Gi\"\ncpus = -2\n",
		"[telegram]\nallow_from = [\"@a\", 1]\n[matrix]\n[email]\n[web]\n",
		"model = 3\n",
		"[[model]]\n",
		"[a.b.c]\nd = { e = [ { f = 1 } ] }\n",
		"x = \"\\uD800\"\n",
		"\x00\xff",
		"",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "conch.toml")
	environ := []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "CONCH_DATA_DIR=" + filepath.Join(dir, "data")}
	f.Fuzz(func(t *testing.T, content string) {
		// Keys naming files make Load read them: a fuzzed path could be
		// /dev/zero. Those keys are tested by hand.
		if l := strings.ToLower(content); strings.Contains(l, "file") || strings.Contains(l, `\u`) {
			return
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path, environ)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if c.File != path {
			t.Fatalf("File = %q, want %q", c.File, path)
		}
		if err := c.Validate(); err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Validate: %v is not a ValidationError with problems", err)
			}
			for _, p := range ve.Problems {
				if p.Key == "" || p.Msg == "" {
					t.Fatalf("problem without a key or message: %+v", p)
				}
			}
		}
	})
}
