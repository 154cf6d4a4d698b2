// Package convert holds the request translations all providers share: tool
// schemas, tool-call arguments and synthesised call ids.
package convert

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"conch"
)

// Schema decodes a tool's JSON Schema into the object the SDKs want. An
// empty schema means "no arguments" ({"type":"object","properties":{}}); a
// schema without a type is taken as an object.
func Schema(spec conch.ToolSpec) (map[string]any, error) {
	raw := bytes.TrimSpace(spec.Parameters)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, BadRequest(fmt.Sprintf("tool %q: parameters are not a JSON Schema object", spec.Name), err)
	}
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
	}
	return m, nil
}

// ArgsObject returns tool-call arguments as a JSON object, for the APIs that
// take an object (Anthropic, Gemini). Empty arguments become {}; arguments
// that are not a JSON object (a model can emit broken JSON through OpenAI's
// string field) are kept as {"_raw": "<text>"} so the history stays valid.
func ArgsObject(args json.RawMessage) json.RawMessage {
	raw := bytes.TrimSpace(args)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	if raw[0] == '{' && json.Valid(raw) {
		return raw
	}
	b, _ := json.Marshal(map[string]string{"_raw": string(args)})
	return b
}

// ArgsString returns tool-call arguments as OpenAI's JSON string: empty
// arguments become "{}", anything else is sent verbatim.
func ArgsString(args json.RawMessage) string {
	if len(bytes.TrimSpace(args)) == 0 {
		return "{}"
	}
	return string(args)
}

// ArgsFromString turns a JSON string of arguments received from a model into
// RawMessage: empty becomes {}, anything else is kept verbatim (even when it
// is not valid JSON, so the tool can report the problem to the model).
func ArgsFromString(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}

// NewID returns a random call id with the given prefix.
func NewID(prefix string) string { return prefix + strings.ToLower(rand.Text()) }

// WireID returns a call id that OpenAI and Anthropic accept: at most 40
// characters of [A-Za-z0-9_-]. Ids from another provider that do not fit (a
// Gemini id carrying its thought signature, after a change of model) map to
// "call_" and a hash, the same for the call and its result.
func WireID(id string) string {
	ok := id != "" && len(id) <= 40
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "call_" + hex.EncodeToString(sum[:16])
}

// BadRequest is the ModelError for a request conch itself built wrong, found
// before anything was sent.
func BadRequest(msg string, err error) *conch.ModelError {
	if err == nil {
		err = fmt.Errorf("%s", msg)
	}
	return &conch.ModelError{Kind: conch.KindBadRequest, Message: msg, Err: err}
}

// ToolNames maps each call id in the history to its tool's name, for
// results that carry only the id.
func ToolNames(msgs []conch.Message) map[string]string {
	names := map[string]string{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
	}
	return names
}

// DataURL is a picture as a base64 data: URL (OpenAI's image_url).
func DataURL(im conch.Image) string {
	return "data:" + im.MediaType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
}

// CheckImages refuses pictures a provider cannot send: not loaded (a
// reference without its bytes) or of a type no provider takes.
func CheckImages(where string, is []conch.Image) error {
	for _, im := range is {
		if len(im.Data) == 0 {
			return BadRequest(fmt.Sprintf("%s: picture %q has no data (not loaded)", where, im.Name), nil)
		}
		switch im.MediaType {
		case "image/png", "image/jpeg", "image/gif", "image/webp":
		default:
			return BadRequest(fmt.Sprintf("%s: picture %q is %q, not PNG, JPEG, GIF or WebP", where, im.Name, im.MediaType), nil)
		}
	}
	return nil
}

// ToolImagesNote introduces the pictures of a tool result that a provider
// sends in a user message after the results (it cannot carry them in one).
func ToolImagesNote(r *conch.ToolResult) string {
	return fmt.Sprintf("[The pictures returned by the %s call %s follow.]", r.Name, r.CallID)
}
