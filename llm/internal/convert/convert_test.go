package convert

import (
	"encoding/json"
	"strings"
	"testing"

	"conch"
)

func TestWireID(t *testing.T) {
	long := strings.Repeat("a", 41)
	tests := []struct {
		in   string
		keep bool
	}{
		{"call_abc123", true},
		{"toolu_01A-b_c", true},
		{strings.Repeat("a", 40), true},
		{long, false},
		{"gensyn_abc#ts=ZmFrZQ", false},
		{"fc/7", false},
		{"", false},
	}
	for _, tc := range tests {
		got := WireID(tc.in)
		if tc.keep && got != tc.in {
			t.Errorf("WireID(%q): got %q, want it unchanged", tc.in, got)
		}
		if !tc.keep && (got == tc.in || len(got) > 40 || WireID(got) != got || WireID(tc.in) != got) {
			t.Errorf("WireID(%q): got %q, want a stable valid replacement", tc.in, got)
		}
	}
	if WireID(long) == WireID(long+"b") {
		t.Errorf("different ids mapped to one")
	}
}

func TestArgsObject(t *testing.T) {
	tests := map[string]string{
		"":              `{}`,
		"null":          `{}`,
		` {"a":1} `:     `{"a":1}`,
		`[1]`:           `{"_raw":"[1]"}`,
		`{"a":`:         `{"_raw":"{\"a\":"}`,
		`"just a text"`: `{"_raw":"\"just a text\""}`,
	}
	for in, want := range tests {
		if got := string(ArgsObject(json.RawMessage(in))); got != want {
			t.Errorf("ArgsObject(%q): got %s, want %s", in, got, want)
		}
	}
}

func TestSchema(t *testing.T) {
	tests := []struct {
		params  string
		wantErr bool
		want    string
	}{
		{"", false, `{"properties":{},"type":"object"}`},
		{`{"properties":{"a":{"type":"string"}}}`, false, `{"properties":{"a":{"type":"string"}},"type":"object"}`},
		{`{"type":"object"}`, false, `{"type":"object"}`},
		{`[1]`, true, ""},
		{`{`, true, ""},
	}
	for _, tc := range tests {
		got, err := Schema(conch.ToolSpec{Name: "t", Parameters: json.RawMessage(tc.params)})
		if (err != nil) != tc.wantErr {
			t.Errorf("Schema(%q): error %v, want error %v", tc.params, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			if conch.KindOf(err) != conch.KindBadRequest {
				t.Errorf("Schema(%q): kind %q, want bad_request", tc.params, conch.KindOf(err))
			}
			continue
		}
		b, _ := json.Marshal(got)
		if string(b) != tc.want {
			t.Errorf("Schema(%q): got %s, want %s", tc.params, b, tc.want)
		}
	}
}
