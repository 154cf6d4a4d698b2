package fakellm_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"conch/internal/testenv/fakellm"
)

func responsesClient(s *fakellm.Server) openai.Client {
	return openai.NewClient(option.WithBaseURL(s.BaseURL(fakellm.Responses)), option.WithAPIKey("k"), option.WithMaxRetries(0))
}

// history is a Responses request as Codex builds it: instructions, a
// developer message, the user's task, an earlier answer with a function
// call and a custom tool call and their outputs.
func history(tools ...responses.ToolUnionParam) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:           "gpt-test",
		Instructions:    openai.String("be brief"),
		MaxOutputTokens: openai.Int(100),
		Tools:           tools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("mind the tests", responses.EasyInputMessageRoleDeveloper),
			responses.ResponseInputItemParamOfMessage("list files", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfMessage("looking", responses.EasyInputMessageRoleAssistant),
			responses.ResponseInputItemParamOfFunctionCall(`{"cmd":"ls"}`, "call_1", "shell"),
			functionOutput("call_1", "a.txt"),
			responses.ResponseInputItemParamOfCustomToolCall("call_2", "*** Begin Patch", "apply_patch"),
			responses.ResponseInputItemParamOfCustomToolCallOutput("call_2", "Done!"),
		}},
	}
}

func functionOutput(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openai.String(callID)
	return item
}

func TestResponsesRecordsHistory(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Text("hi"))
	c := responsesClient(s)
	if _, err := c.Responses.New(context.Background(), history(responses.ToolParamOfFunction("shell", map[string]any{"type": "object"}, false), responses.ToolParamOfCustom("apply_patch"))); err != nil {
		t.Fatal(err)
	}
	r, _ := s.Last()
	if r.Provider != fakellm.Responses || r.Path != "/v1/responses" || r.Model != "gpt-test" || r.MaxTokens != 100 || r.APIKey != "k" || r.Stream {
		t.Fatalf("request: provider %q path %q model %q max %d key %q stream %v", r.Provider, r.Path, r.Model, r.MaxTokens, r.APIKey, r.Stream)
	}
	if r.System != "be brief\n\nmind the tests" {
		t.Errorf("system %q", r.System)
	}
	want := []struct {
		role, text, call, result string
	}{
		{"user", "list files", "", ""},
		{"assistant", "looking", "shell", ""},
		{"tool", "", "", "a.txt"},
		{"assistant", "", "apply_patch", ""},
		{"tool", "", "", "Done!"},
	}
	if len(r.Messages) != len(want) {
		t.Fatalf("messages %+v", r.Messages)
	}
	for i, w := range want {
		m := r.Messages[i]
		if m.Role != w.role || m.Text != w.text {
			t.Errorf("message %d: %s %q, want %s %q", i, m.Role, m.Text, w.role, w.text)
		}
		if w.call != "" && (len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != w.call) {
			t.Errorf("message %d: calls %+v, want %s", i, m.ToolCalls, w.call)
		}
		if w.result != "" && (len(m.ToolResults) != 1 || m.ToolResults[0].Content != w.result) {
			t.Errorf("message %d: results %+v, want %q", i, m.ToolResults, w.result)
		}
	}
	if got := string(r.Messages[3].ToolCalls[0].Args); got != `{"input":"*** Begin Patch"}` {
		t.Errorf("custom call args %s", got)
	}
	if r.Messages[4].ToolResults[0].CallID != "call_2" {
		t.Errorf("custom result call id %q", r.Messages[4].ToolResults[0].CallID)
	}
	if tl, ok := r.Tool("apply_patch"); !ok || tl.Type != "custom" {
		t.Errorf("apply_patch tool %+v %v", tl, ok)
	}
	if tl, ok := r.Tool("shell"); !ok || tl.Type != "function" {
		t.Errorf("shell tool %+v %v", tl, ok)
	}
}

func TestResponsesAnswers(t *testing.T) {
	s := fakellm.New(t)
	c := responsesClient(s)
	ctx := context.Background()
	params := history(responses.ToolParamOfFunction("shell", map[string]any{"type": "object"}, false), responses.ToolParamOfCustom("apply_patch"))

	s.Push(fakellm.Text("hello there").Usage(7, 2))
	res, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.OutputText() != "hello there" || res.Status != responses.ResponseStatusCompleted || res.Usage.InputTokens != 7 || res.Usage.OutputTokens != 2 || res.Usage.TotalTokens != 9 {
		t.Errorf("text answer: %q %s usage %+v", res.OutputText(), res.Status, res.Usage)
	}

	s.Push(fakellm.ToolCall("shell", `{"cmd":"ls"}`).Text("let me look"))
	res, err = c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) != 2 || res.Output[0].Type != "message" || res.Output[1].Type != "function_call" {
		t.Fatalf("function call answer: %s", res.RawJSON())
	}
	fc := res.Output[1].AsFunctionCall()
	if fc.Name != "shell" || fc.Arguments != `{"cmd":"ls"}` || !strings.HasPrefix(fc.CallID, "call_") || !strings.HasPrefix(fc.ID, "fc_") {
		t.Errorf("function call %+v", fc)
	}

	// apply_patch is offered as a custom tool: the call is a
	// custom_tool_call whose input is the "input" argument.
	s.Push(fakellm.ToolCall("apply_patch", `{"input":"*** Begin Patch\n*** End Patch\n"}`))
	res, err = c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) != 1 || res.Output[0].Type != "custom_tool_call" {
		t.Fatalf("custom call answer: %s", res.RawJSON())
	}
	if cc := res.Output[0].AsCustomToolCall(); cc.Name != "apply_patch" || cc.Input != "*** Begin Patch\n*** End Patch\n" || cc.CallID == "" {
		t.Errorf("custom call %+v", cc)
	}

	s.Push(fakellm.Text("cut").MaxTokens())
	res, err = c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != responses.ResponseStatusIncomplete || res.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("max tokens: %s %+v", res.Status, res.IncompleteDetails)
	}

	s.Push(fakellm.ContextTooLong())
	_, err = c.Responses.New(ctx, params)
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "context_length_exceeded" {
		t.Errorf("context too long: %v", err)
	}
}

func asError(err error, target **openai.Error) bool {
	e, ok := err.(*openai.Error)
	if ok {
		*target = e
	}
	return ok
}

// streamTypes runs a streamed request and returns the event types, the
// joined text and argument deltas, and the last event.
func streamTypes(t *testing.T, c openai.Client, params responses.ResponseNewParams) (types []string, deltas string, last responses.ResponseStreamEventUnion) {
	t.Helper()
	st := c.Responses.NewStreaming(context.Background(), params)
	seq := int64(0)
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("event %s: sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			deltas += ev.Delta
		}
		last = ev
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return types, deltas, last
}

func TestResponsesStream(t *testing.T) {
	s := fakellm.New(t)
	c := responsesClient(s)
	params := history(responses.ToolParamOfFunction("shell", map[string]any{"type": "object"}, false), responses.ToolParamOfCustom("apply_patch"))

	s.Push(fakellm.Text("hello streamed world"))
	types, text, last := streamTypes(t, c, params)
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if strings.Join(types, " ") != want {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(types, " "), want)
	}
	if text != "hello streamed world" {
		t.Errorf("deltas %q", text)
	}
	done := last.AsResponseCompleted().Response
	if done.OutputText() != "hello streamed world" || done.Status != responses.ResponseStatusCompleted || done.Usage.TotalTokens == 0 {
		t.Errorf("completed: %q %s %+v", done.OutputText(), done.Status, done.Usage)
	}
	if r, _ := s.Last(); !r.Stream {
		t.Error("request not recorded as streamed")
	}

	s.Push(fakellm.ToolCall("shell", `{"cmd":"ls -la /tmp"}`))
	types, args, last := streamTypes(t, c, params)
	want = "response.created response.in_progress response.output_item.added " +
		"response.function_call_arguments.delta response.function_call_arguments.delta response.function_call_arguments.delta " +
		"response.function_call_arguments.done response.output_item.done response.completed"
	if strings.Join(types, " ") != want {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(types, " "), want)
	}
	if args != `{"cmd":"ls -la /tmp"}` {
		t.Errorf("argument deltas %q", args)
	}
	if fc := last.AsResponseCompleted().Response.Output[0].AsFunctionCall(); fc.Arguments != args || fc.Name != "shell" {
		t.Errorf("completed call %+v", fc)
	}

	s.Push(fakellm.ToolCall("apply_patch", `{"input":"*** Begin Patch\n*** End Patch\n"}`))
	types, input, _ := streamTypes(t, c, params)
	if !strings.Contains(strings.Join(types, " "), "response.custom_tool_call_input.delta") || input != "*** Begin Patch\n*** End Patch\n" {
		t.Errorf("custom call events %v input %q", types, input)
	}

	s.Push(fakellm.Text("cut short").MaxTokens())
	if _, _, last = streamTypes(t, c, params); last.Type != "response.incomplete" {
		t.Errorf("max tokens ends with %s", last.Type)
	}

	s.Push(fakellm.Text("one two three").FailAfter(1, fakellm.Error(500, "boom")))
	types, _, last = streamTypes(t, c, params)
	if last.Type != "response.failed" {
		t.Fatalf("failed stream events %v", types)
	}
	if f := last.AsResponseFailed().Response; f.Status != responses.ResponseStatusFailed || f.Error.Code != "server_error" || f.Error.Message != "boom" {
		t.Errorf("failed response %s %+v", f.Status, f.Error)
	}
}

// Codex 0.169 declares its tools in an "additional_tools" input item
// (namespaces of functions and custom tools), not in "tools".
func TestResponsesAdditionalTools(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.ToolCall("exec", `{"input":"text(1)"}`))
	body := `{"model":"gpt-test","stream":false,"input":[
		{"type":"additional_tools","role":"developer","tools":[{"type":"namespace","name":"functions","tools":[
			{"type":"custom","name":"exec","description":"Run JavaScript","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}},
			{"type":"function","name":"wait","parameters":{"type":"object"}}]}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}]}`
	resp, err := http.Post(s.BaseURL(fakellm.Responses)+"/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Output []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Input string `json:"input"`
		} `json:"output"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, decode %v", resp.StatusCode, err)
	}
	if len(out.Output) != 1 || out.Output[0].Type != "custom_tool_call" || out.Output[0].Input != "text(1)" {
		t.Errorf("output %+v", out.Output)
	}
	r, _ := s.Last()
	if tl, ok := r.Tool("exec"); !ok || tl.Type != "custom" || !strings.Contains(string(tl.Parameters), "lark") {
		t.Errorf("exec tool %+v", tl)
	}
	if _, ok := r.Tool("wait"); !ok || r.LastUserText() != "go" {
		t.Errorf("tools %+v, last user text %q", r.Tools, r.LastUserText())
	}
}

// A request for a JSON answer (Gemini CLI's model router) is recorded with
// its schema, so a handler can answer it.
func TestJSONSchemaRecorded(t *testing.T) {
	s := fakellm.New(t)
	s.Handle(func(r fakellm.Request) fakellm.Reply {
		if r.JSONSchema != nil {
			return fakellm.Text(`{"complexity_score":10}`)
		}
		return fakellm.Text("plain")
	})
	cases := []struct {
		p    fakellm.Provider
		path string
		body string
	}{
		{fakellm.Gemini, "/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"OBJECT"}}}`},
		{fakellm.Responses, "/responses", `{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"OBJECT"}}}}`},
		{fakellm.OpenAI, "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"OBJECT"}}}}`},
	}
	for _, c := range cases {
		resp, err := http.Post(s.BaseURL(c.p)+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		r, _ := s.Last()
		if string(r.JSONSchema) != `{"type":"OBJECT"}` || resp.StatusCode != 200 {
			t.Errorf("%s: status %d schema %s", c.p, resp.StatusCode, r.JSONSchema)
		}
	}
}

// Claude Code 2.1 puts "system" messages between the others.
func TestAnthropicSystemMessages(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Text("ok"))
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"text","text":"# Environment"}]}]}`
	req, _ := http.NewRequest(http.MethodPost, s.BaseURL(fakellm.Anthropic)+"/v1/messages?beta=true", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r, _ := s.Last()
	if resp.StatusCode != 200 || len(r.Messages) != 2 || r.Messages[1].Role != "system" || r.Messages[1].Text != "# Environment" || r.LastUserText() != "hi" {
		t.Errorf("status %d messages %+v", resp.StatusCode, r.Messages)
	}
}
