package tool

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaFor derives the JSON Schema of a tool's arguments from their struct
// T with github.com/google/jsonschema-go (the library the MCP Go SDK uses):
// a property per json field, required unless the field is omitempty,
// described by its `jsonschema` tag, and no other properties allowed. The
// `schema` tag adds what jsonschema-go reads no tag for, comma-separated:
// enum=a|b|c, minimum=n, maximum=n, and type=integer (a number field the
// model should fill with whole numbers; a pointer field, which only tells
// "absent" from zero, without jsonschema-go's "null"). adjust sets what
// depends on a tool's options (a maximum from its configuration).
//
// It panics on a struct it cannot describe: the tools' argument structs are
// fixed, and every Spec runs in the package's tests.
//
// Only this wrapper is generic: a generic function is compiled once per
// argument struct (each struct is its own shape), and the work below, once
// per tool, was 0.15 MB of the release binary as 40 copies
// (docs/performance.md, Binary size).
func schemaFor[T any](adjust ...func(*jsonschema.Schema)) json.RawMessage {
	return schemaOf(reflect.TypeFor[T](), adjust...)
}

func schemaOf(t reflect.Type, adjust ...func(*jsonschema.Schema)) json.RawMessage {
	s, err := deriveSchema(t)
	if err != nil {
		panic(fmt.Sprintf("tool schema for %s: %v", t, err))
	}
	for _, f := range adjust {
		f(s)
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tool schema for %s: %v", t, err))
	}
	return b
}

func deriveSchema(t reflect.Type) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, err
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("schema")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		p := s.Properties[name]
		if p == nil {
			return nil, fmt.Errorf("field %s: no property %q", f.Name, name)
		}
		for kv := range strings.SplitSeq(tag, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "enum":
				for e := range strings.SplitSeq(v, "|") {
					p.Enum = append(p.Enum, e)
				}
			case "minimum", "maximum":
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return nil, fmt.Errorf("field %s: %s: %w", f.Name, k, err)
				}
				if k == "minimum" {
					p.Minimum = &n
				} else {
					p.Maximum = &n
				}
			case "type":
				p.Type, p.Types = v, nil
			default:
				return nil, fmt.Errorf("field %s: unknown schema tag %q", f.Name, kv)
			}
		}
	}
	return s, nil
}

// maximum returns an adjust func setting property name's maximum and, if
// desc is not empty, its description.
func maximum(name string, max float64, desc string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		p := s.Properties[name]
		p.Maximum = &max
		if desc != "" {
			p.Description = desc
		}
	}
}
