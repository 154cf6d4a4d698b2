package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
)

// maxSchemaDepth bounds nesting (and $ref expansion) of a server's schema.
const maxSchemaDepth = 12

// CleanSchema turns a server's input schema into the portable subset every
// provider accepts: a top-level object with properties; local $refs
// (#/$defs/…, #/definitions/…) inlined up to maxSchemaDepth, recursion cut
// to an unconstrained value; keywords Gemini refuses or that carry nothing
// for the model ($schema, $id, $comment, $defs, definitions, $anchor,
// $dynamicRef, examples, readOnly, writeOnly, deprecated,
// unevaluatedProperties, patternProperties, dependentSchemas, if/then/else,
// contentEncoding, contentMediaType) dropped; "const" turned into a
// one-value "enum"; a type list ["string","null"] reduced to its first
// non-null type. What it cannot read is an error the
// caller reports (the tool is then not offered).
func CleanSchema(raw json.RawMessage) (json.RawMessage, error) {
	var root map[string]any
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		root = map[string]any{}
	} else if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("input schema is not a JSON object: %w", err)
	}
	defs := map[string]any{}
	for _, k := range []string{"$defs", "definitions"} {
		if d, ok := root[k].(map[string]any); ok {
			for name, v := range d {
				defs["#/"+k+"/"+name] = v
			}
		}
	}
	c := cleaner{defs: defs}
	out, _ := c.clean(root, 0, nil).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	if t, _ := out["type"].(string); t != "object" {
		// A top-level schema that is not an object (anyOf at the top, a
		// bare type) cannot be a tool's parameters: wrap nothing, offer an
		// open object rather than refuse the tool.
		if _, hasProps := out["properties"]; !hasProps {
			out = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		out["type"] = "object"
	}
	if _, ok := out["properties"]; !ok {
		out["properties"] = map[string]any{}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return b, nil
}

type cleaner struct{ defs map[string]any }

var dropped = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "$defs": true, "definitions": true, "$anchor": true,
	"$dynamicRef": true, "$dynamicAnchor": true, "examples": true, "readOnly": true, "writeOnly": true,
	"deprecated": true, "unevaluatedProperties": true, "unevaluatedItems": true, "patternProperties": true,
	"dependentSchemas": true, "dependentRequired": true, "if": true, "then": true, "else": true,
	"contentEncoding": true, "contentMediaType": true, "propertyNames": true, "$vocabulary": true,
}

// clean returns a cleaned copy of v (a schema or part of one); seen holds
// the $refs being expanded above it.
func (c cleaner) clean(v any, depth int, seen []string) any {
	m, ok := v.(map[string]any)
	if !ok {
		if b, ok := v.(bool); ok && b {
			return map[string]any{}
		}
		return v
	}
	if depth > maxSchemaDepth {
		return map[string]any{}
	}
	if ref, ok := m["$ref"].(string); ok {
		target, known := c.defs[ref]
		for _, s := range seen {
			if s == ref {
				known = false
			}
		}
		if !known {
			// Remote, unknown or recursive: any value, described.
			out := map[string]any{}
			if d, ok := m["description"].(string); ok {
				out["description"] = d
			}
			return out
		}
		merged := map[string]any{}
		if tm, ok := target.(map[string]any); ok {
			for k, v := range tm {
				merged[k] = v
			}
		}
		for k, v := range m {
			if k != "$ref" {
				merged[k] = v
			}
		}
		return c.clean(merged, depth+1, append(seen, ref))
	}
	out := make(map[string]any, len(m))
	for k, val := range m {
		if dropped[k] {
			continue
		}
		switch k {
		case "properties":
			props, ok := val.(map[string]any)
			if !ok {
				continue
			}
			np := make(map[string]any, len(props))
			for name, p := range props {
				np[name] = c.clean(p, depth+1, seen)
			}
			out[k] = np
		case "items", "additionalProperties", "not", "contains":
			if b, ok := val.(bool); ok {
				if k == "additionalProperties" {
					out[k] = b
				}
				continue
			}
			out[k] = c.clean(val, depth+1, seen)
		case "anyOf", "oneOf", "allOf", "prefixItems":
			list, ok := val.([]any)
			if !ok {
				continue
			}
			nl := make([]any, 0, len(list))
			for _, s := range list {
				nl = append(nl, c.clean(s, depth+1, seen))
			}
			out[k] = nl
		case "const":
			out["enum"] = []any{val}
		case "type":
			if list, ok := val.([]any); ok {
				first := ""
				for _, t := range list {
					if s, _ := t.(string); s != "null" && first == "" {
						first = s
					}
				}
				if first == "" {
					first = "string"
				}
				out["type"] = first
				continue
			}
			out[k] = val
		default:
			out[k] = val
		}
	}
	if req, ok := out["required"].([]any); ok {
		// required may only name declared properties (OpenAI and Gemini
		// refuse others).
		props, _ := out["properties"].(map[string]any)
		var kept []any
		for _, r := range req {
			if s, ok := r.(string); ok && props != nil {
				if _, declared := props[s]; declared {
					kept = append(kept, s)
				}
			}
		}
		if len(kept) == 0 {
			delete(out, "required")
		} else {
			out["required"] = kept
		}
	}
	return out
}
