package fakellm_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv/fakellm"
)

type sseEvent struct {
	name string
	data string
}

// readSSE posts body to path and returns the events of the answer.
func readSSE(t *testing.T, s *fakellm.Server, path, body string) ([]sseEvent, error) {
	t.Helper()
	resp, err := http.Post(s.URL()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type: got %q, want text/event-stream", ct)
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Errorf("line %q: want event: or data:", line)
		}
	}
	return out, sc.Err()
}

func decode(t *testing.T, data string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("event %q: %v", data, err)
	}
	return v
}

func TestOpenAIStreamWire(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Text("hello big world").Usage(5, 3), fakellm.ToolCall("bash", `{"cmd":"ls -l"}`))
	const req = `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	events, err := readSSE(t, s, "/v1/chat/completions", req)
	if err != nil {
		t.Fatal(err)
	}
	// role, three words, finish, usage, [DONE]
	if len(events) != 7 || events[6].data != "[DONE]" {
		t.Fatalf("got %d events %v, want 7 ending in [DONE]", len(events), events)
	}
	var text strings.Builder
	for i, e := range events[:6] {
		c := decode(t, e.data)
		if c["object"] != "chat.completion.chunk" || c["id"] != decode(t, events[0].data)["id"] {
			t.Errorf("chunk %d: got %v, want a chat.completion.chunk with the stream's id", i, c)
		}
		if i == 5 {
			if choices := c["choices"].([]any); len(choices) != 0 || at(c, "usage", "completion_tokens") != 3.0 {
				t.Errorf("usage chunk: got %v, want no choices and completion_tokens 3", c)
			}
			continue
		}
		if u, ok := c["usage"]; !ok || u != nil {
			t.Errorf("chunk %d: usage %v, want null", i, u)
		}
		if s, ok := at(c, "choices", 0, "delta", "content").(string); ok {
			text.WriteString(s)
		}
		if f := at(c, "choices", 0, "finish_reason"); (i == 4) != (f == "stop") {
			t.Errorf("chunk %d: finish_reason %v", i, f)
		}
	}
	if text.String() != "hello big world" || at(decode(t, events[0].data), "choices", 0, "delta", "role") != "assistant" {
		t.Errorf("text: got %q (first chunk %s)", text.String(), events[0].data)
	}

	events, err = readSSE(t, s, "/v1/chat/completions", req)
	if err != nil {
		t.Fatal(err)
	}
	var args strings.Builder
	for _, e := range events[:len(events)-1] {
		c := decode(t, e.data)
		if tc, ok := at(c, "choices", 0, "delta", "tool_calls", 0).(map[string]any); ok {
			if at(tc, "index") != 0.0 {
				t.Errorf("tool call chunk %v: want index 0", tc)
			}
			args.WriteString(at(tc, "function", "arguments").(string))
		}
	}
	first := decode(t, events[0].data)
	if at(first, "choices", 0, "delta", "tool_calls", 0, "function", "name") != "bash" || at(first, "choices", 0, "delta", "tool_calls", 0, "id") == nil {
		t.Errorf("first chunk: got %s, want the call's id and name", events[0].data)
	}
	if args.String() != `{"cmd":"ls -l"}` {
		t.Errorf("arguments: got %q", args.String())
	}
}

func TestAnthropicStreamWire(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.ToolCall("bash", `{"cmd":"ls"}`).Text("Looking now.").Usage(9, 4),
		fakellm.Text("one two three").FailAfter(1, fakellm.Error(529, "Overloaded")))
	const req = `{"model":"claude-test","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	events, err := readSSE(t, s, "/v1/messages", req)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var text, input strings.Builder
	for _, e := range events {
		d := decode(t, e.data)
		if d["type"] != e.name {
			t.Errorf("event %s: data type %v, want the event's name", e.name, d["type"])
		}
		names = append(names, e.name)
		if e.name == "content_block_delta" {
			switch at(d, "delta", "type") {
			case "text_delta":
				text.WriteString(at(d, "delta", "text").(string))
			case "input_json_delta":
				input.WriteString(at(d, "delta", "partial_json").(string))
			}
		}
		if e.name == "message_delta" && (at(d, "delta", "stop_reason") != "tool_use" || at(d, "usage", "output_tokens") != 4.0) {
			t.Errorf("message_delta: got %s", e.data)
		}
	}
	order := strings.Join(slices.Compact(names), ",")
	if want := "message_start,content_block_start,ping,content_block_delta,content_block_stop,content_block_start,content_block_delta,content_block_stop,message_delta,message_stop"; order != want {
		t.Errorf("events: got %s, want %s", order, want)
	}
	if text.String() != "Looking now." || input.String() != `{"cmd":"ls"}` {
		t.Errorf("text %q input %q", text.String(), input.String())
	}

	events, err = readSSE(t, s, "/v1/messages", req)
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	if d := decode(t, last.data); last.name != "error" || at(d, "error", "type") != "overloaded_error" || at(d, "error", "message") != "Overloaded" {
		t.Errorf("last event: got %s %s, want an overloaded_error event", last.name, last.data)
	}
}

// A delayed chunk arrives later than the one before it: the fake flushes
// every event.
func TestStreamChunkDelay(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Text("a b").ChunkDelay(50 * time.Millisecond))
	resp, err := http.Post(s.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var times []time.Time
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"content":"`) {
			times = append(times, time.Now())
		}
	}
	if len(times) != 3 || times[2].Sub(times[1]) < 40*time.Millisecond {
		t.Errorf("content chunks at %v: want three, the last 50ms after the one before", times)
	}
}
