package main

import (
	"testing"

	"github.com/BurntSushi/toml"
)

func TestTOMLDocEditsInPlace(t *testing.T) {
	in := `# top comment
data_dir = "/srv/conch"

[model]
# which model
provider = "openai" # was chosen long ago
name = "old"

[[model.fallbacks]]
provider = "anthropic"
name = "keep-me"

[budget]
daily_usd = 5
`
	d := parseTOMLDoc(in)
	d.set("model", "name", tomlString("new"), "")
	d.set("model", "base_url", tomlString("http://x"), "")
	d.set("sandbox", "engine", tomlString("none"), "the container engine")
	d.set("", "instance_id", tomlString("i1"), "")
	want := `# top comment
data_dir = "/srv/conch"
instance_id = "i1"

[model]
# which model
provider = "openai" # was chosen long ago
name = "new"
base_url = "http://x"

[[model.fallbacks]]
provider = "anthropic"
name = "keep-me"

[budget]
daily_usd = 5

[sandbox]
# the container engine
engine = "none"
`
	if got := d.String(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	var v map[string]any
	if _, err := toml.Decode(d.String(), &v); err != nil {
		t.Fatalf("not TOML: %v", err)
	}
	if raw, _ := d.get("model", "provider"); unquote(raw) != "openai" {
		t.Errorf("get provider: %q", raw)
	}
	if raw, ok := d.get("model", "missing"); ok {
		t.Errorf("get missing: %q", raw)
	}
	fresh := parseTOMLDoc("")
	fresh.set("model", "provider", tomlString("gemini"), "")
	if got := fresh.String(); got != "[model]\nprovider = \"gemini\"\n" {
		t.Errorf("fresh: %q", got)
	}
}
