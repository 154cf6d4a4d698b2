package tool

import (
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"conch"
)

var updateSchemas = flag.Bool("update", false, "rewrite testdata/schemas.golden.json")

// allTools returns every built-in tool, configured as the golden file was
// written (bash's 10-minute limit, web_search's 10 results).
func allTools() []conch.Tool {
	return []conch.Tool{
		NewBash(BashOptions{Timeout: 10 * time.Minute}), &Code{}, &RespondToAgent{},
		NewReadFile(FilesOptions{}), NewWriteFile(FilesOptions{}), NewListFiles(FilesOptions{}),
		Remember{}, Forget{}, &Schedule{}, NewSkill(nil),
		&TerminalOpen{}, &TerminalType{}, &TerminalWait{}, &TerminalClose{}, &TerminalRead{}, &Watch{},
		NewWebFetch(WebFetchOptions{}), NewWebSearch(WebSearchOptions{MaxResults: 10}), &SendFile{}, NewViewImage(),
	}
}

// The schemas derived from the argument structs are the hand-written ones
// they replaced (testdata/schemas.golden.json, taken from those), property
// by property: types, descriptions, required fields, enums, minimum and
// maximum. All of them admit no other properties (remember, forget, skill,
// web_fetch and web_search did not say so before).
func TestDerivedSchemas(t *testing.T) {
	got := map[string]json.RawMessage{}
	for _, tl := range allTools() {
		s := tl.Spec()
		got[s.Name] = s.Parameters
	}
	const golden = "testdata/schemas.golden.json"
	if *updateSchemas {
		b, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]map[string]any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("got %d tools, want %d", len(got), len(want))
	}
	for name, w := range want {
		var g map[string]any
		if err := json.Unmarshal(got[name], &g); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: schema\n got %s\nwant %s", name, got[name], mustJSON(w))
		}
		if g["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties is %v, want false", name, g["additionalProperties"])
		}
	}
	// The constraints the loop above checks, spelled out for the tools with
	// enums and required fields.
	props := func(name, prop string) map[string]any {
		var g map[string]any
		_ = json.Unmarshal(got[name], &g) // checked above
		p, _ := g["properties"].(map[string]any)[prop].(map[string]any)
		return p
	}
	required := func(name string) []string {
		var g struct{ Required []string }
		_ = json.Unmarshal(got[name], &g) // checked above
		return g.Required
	}
	for _, tc := range []struct {
		tool     string
		required []string
		enum     string
		values   []any
	}{
		{"schedule", []string{"action"}, "action", []any{"at", "after", "cron", "list", "cancel"}},
		{"watch", []string{"on", "message"}, "on", []any{"exit", "match", "file"}},
		{"terminal_type", []string{"tty", "expect", "text"}, "", nil},
		{"write_file", []string{"path", "content"}, "", nil},
		{"bash", []string{"command"}, "", nil},
		{"list_files", nil, "", nil},
	} {
		if r := required(tc.tool); !slices.Equal(r, tc.required) {
			t.Errorf("%s: required %v, want %v", tc.tool, r, tc.required)
		}
		if tc.enum != "" && !reflect.DeepEqual(props(tc.tool, tc.enum)["enum"], tc.values) {
			t.Errorf("%s.%s: enum %v, want %v", tc.tool, tc.enum, props(tc.tool, tc.enum)["enum"], tc.values)
		}
	}
	if p := props("bash", "timeout_seconds"); p["type"] != "integer" || p["minimum"] != 1.0 || p["maximum"] != 600.0 {
		t.Errorf("bash.timeout_seconds: got %v, want an integer from 1 to 600", p)
	}
	if p := props("terminal_close", "tty"); p["type"] != "integer" || p["minimum"] != 0.0 {
		t.Errorf("terminal_close.tty: got %v, want an integer from 0 (no null)", p)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// schemaFor refuses tags it does not know and properties it cannot find.
func TestSchemaTagErrors(t *testing.T) {
	type unknown struct {
		A string `json:"a" schema:"pattern=x"`
	}
	type badNumber struct {
		A int `json:"a" schema:"minimum=one"`
	}
	type omitted struct {
		A string `json:"-" schema:"enum=x"`
	}
	for name, f := range map[string]func() error{
		"unknown":    func() error { _, err := deriveSchema(reflect.TypeFor[unknown]()); return err },
		"bad number": func() error { _, err := deriveSchema(reflect.TypeFor[badNumber]()); return err },
		"omitted":    func() error { _, err := deriveSchema(reflect.TypeFor[omitted]()); return err },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: got nil, want an error", name)
		}
	}
}
