package mcp

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// providerName is the narrowest rule of the three providers (Gemini's,
// with OpenAI's charset and length).
var providerName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`)

func TestToolName(t *testing.T) {
	long := strings.Repeat("very_long_tool_name_", 5)
	cases := []struct {
		server, tool, want string
	}{
		{"docs", "search", "mcp__docs__search"},
		{"docs", "bash", "mcp__docs__bash"},
		{"docs", "lookup.v2", ""},
		{"docs", "lookup_v2", "mcp__docs__lookup_v2"},
		{"docs", "ünïcode tool", ""},
		{"docs", long, ""},
		{"docs", "", ""},
	}
	seen := map[string]string{}
	for _, c := range cases {
		got := ToolName(c.server, c.tool)
		if c.want != "" && got != c.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
		}
		if !providerName.MatchString(got) || len(got) > MaxToolName {
			t.Errorf("ToolName(%q, %q) = %q: not a name every provider accepts", c.server, c.tool, got)
		}
		if !strings.HasPrefix(got, Prefix+c.server+"__") {
			t.Errorf("ToolName(%q, %q) = %q: want the mcp__<server>__ prefix", c.server, c.tool, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q share the name %q", other, c.tool, got)
		}
		seen[got] = c.tool
		if again := ToolName(c.server, c.tool); again != got {
			t.Errorf("ToolName is not deterministic: %q then %q", got, again)
		}
	}
	// "lookup.v2" and "lookup_v2" differ although both clean to lookup_v2.
	if ToolName("docs", "lookup.v2") == ToolName("docs", "lookup_v2") {
		t.Error("a cleaned name collides with a tool that had that name")
	}
	// Two long names with the same first 64 characters stay apart.
	if ToolName("docs", long+"a") == ToolName("docs", long+"b") {
		t.Error("two shortened names collide")
	}
}

func TestCleanSchema(t *testing.T) {
	in := `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"$defs":{"q":{"type":"string","description":"what"},"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}},
		"properties":{
			"query":{"$ref":"#/$defs/q"},
			"kind":{"const":"word"},
			"limit":{"type":["integer","null"],"examples":[1]},
			"tree":{"$ref":"#/$defs/node"},
			"remote":{"$ref":"https://example.com/schema.json","description":"elsewhere"},
			"when":{"type":"string","if":{"minLength":1},"then":{"maxLength":3}}
		},
		"required":["query","ghost"],"additionalProperties":false}`
	out, err := CleanSchema(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, gone := range []string{"$schema", "$defs", "$ref", `"const"`, "examples", `"if"`, `"then"`, "ghost"} {
		if strings.Contains(s, gone) {
			t.Errorf("cleaned schema still has %s: %s", gone, s)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	p := m["properties"].(map[string]any)
	if q := p["query"].(map[string]any); q["type"] != "string" || q["description"] != "what" {
		t.Errorf("$ref not inlined: %v", q)
	}
	if k := p["kind"].(map[string]any); k["enum"] == nil {
		t.Errorf("const not turned into enum: %v", k)
	}
	if l := p["limit"].(map[string]any); l["type"] != "integer" {
		t.Errorf("type list not reduced: %v", l)
	}
	if r := p["remote"].(map[string]any); r["description"] != "elsewhere" {
		t.Errorf("remote $ref lost its description: %v", r)
	}
	if req := m["required"].([]any); len(req) != 1 || req[0] != "query" {
		t.Errorf("required = %v, want only the declared query", req)
	}
	if m["additionalProperties"] != false {
		t.Errorf("additionalProperties dropped: %v", m)
	}

	for _, in := range []string{``, `null`, `{}`, `{"anyOf":[{"type":"string"}]}`, `{"type":"string"}`} {
		out, err := CleanSchema(json.RawMessage(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil || m["type"] != "object" || m["properties"] == nil {
			t.Errorf("CleanSchema(%s) = %s, want an object with properties", in, out)
		}
	}
	if _, err := CleanSchema(json.RawMessage(`[1,2]`)); err == nil {
		t.Error("a schema that is not an object was accepted")
	}
}

func FuzzCleanSchema(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"$ref":"#/$defs/a"}}}`)
	f.Add(`{"properties":{"x":{"type":["null"]}},"required":[1,"x"]}`)
	f.Fuzz(func(t *testing.T, in string) {
		out, err := CleanSchema(json.RawMessage(in))
		if err != nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil || m["type"] != "object" {
			t.Fatalf("CleanSchema(%s) = %s: not an object schema", in, out)
		}
	})
}
