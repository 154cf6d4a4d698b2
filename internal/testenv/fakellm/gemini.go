package fakellm

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Gemini generateContent wire format (the Gemini API, not Vertex AI).

type gemPart struct {
	Text             string `json:"text,omitempty"`
	Thought          bool   `json:"thought,omitempty"`
	ThoughtSignature string `json:"thoughtSignature,omitempty"`
	InlineData       *struct {
		MIMEType string `json:"mimeType"`
		Data     string `json:"data"`
	} `json:"inlineData,omitempty"`
	FunctionCall *struct {
		ID   string          `json:"id,omitempty"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args,omitempty"`
	} `json:"functionCall,omitempty"`
	FunctionResponse *struct {
		ID       string          `json:"id,omitempty"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response,omitempty"`
	} `json:"functionResponse,omitempty"`
}

type gemContent struct {
	Role  string    `json:"role,omitempty"`
	Parts []gemPart `json:"parts"`
}

type gemRequest struct {
	Contents          []gemContent `json:"contents"`
	SystemInstruction *gemContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Description          string          `json:"description"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		MaxOutputTokens    int             `json:"maxOutputTokens"`
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

func gemText(parts []gemPart) string {
	var texts []string
	for _, p := range parts {
		if p.Text != "" && !p.Thought {
			texts = append(texts, p.Text)
		}
	}
	return joinText(texts)
}

func decodeGemini(body []byte, req *Request) error {
	var in gemRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return err
	}
	req.MaxTokens = in.GenerationConfig.MaxOutputTokens
	if gc := in.GenerationConfig; gc.ResponseMimeType == "application/json" {
		req.JSONSchema = json.RawMessage("{}")
		for _, sc := range []json.RawMessage{gc.ResponseJSONSchema, gc.ResponseSchema} {
			if len(sc) > 0 && string(sc) != "null" {
				req.JSONSchema = sc
				break
			}
		}
	}
	if in.SystemInstruction != nil {
		req.System = gemText(in.SystemInstruction.Parts)
	}
	inline := 0
	for i, c := range in.Contents {
		role := c.Role
		switch role {
		case "model":
			role = "assistant"
		case "user", "function", "":
			role = "user"
		default:
			return fmt.Errorf("contents[%d]: unknown role %q", i, c.Role)
		}
		msg := Message{Role: role, Text: gemText(c.Parts)}
		for j, p := range c.Parts {
			if d := p.InlineData; d != nil {
				inline += len(d.Data)
				if inline > geminiMaxRequestBytes {
					return &mediaError{msg: fmt.Sprintf("Request payload size exceeds the limit: %d bytes.", geminiMaxRequestBytes)}
				}
				if strings.HasPrefix(d.MIMEType, "audio/") {
					au, err := decodeGeminiAudio(fmt.Sprintf("contents[%d].parts[%d]", i, j), d.MIMEType, d.Data)
					if err != nil {
						return err
					}
					msg.Audio = append(msg.Audio, au)
					continue
				}
				im, err := decodePicture(Gemini, fmt.Sprintf("contents[%d].parts[%d]", i, j), d.MIMEType, d.Data)
				if err != nil {
					return err
				}
				msg.Images = append(msg.Images, im)
			}
			if fc := p.FunctionCall; fc != nil {
				msg.ToolCalls = append(msg.ToolCalls, Call{ID: fc.ID, Name: fc.Name, Args: fc.Args, Signature: p.ThoughtSignature})
			}
			if fr := p.FunctionResponse; fr != nil {
				res, err := gemResult(fr.Response)
				if err != nil {
					return fmt.Errorf("contents[%d].parts[%d].functionResponse: %w", i, j, err)
				}
				res.CallID, res.Name = fr.ID, fr.Name
				msg.ToolResults = append(msg.ToolResults, res)
			}
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range in.Tools {
		for _, fd := range t.FunctionDeclarations {
			params := fd.ParametersJSONSchema
			if len(params) == 0 {
				params = fd.Parameters
			}
			req.Tools = append(req.Tools, Tool{Name: fd.Name, Description: fd.Description, Parameters: params})
		}
	}
	return nil
}

// gemResult reads a functionResponse.response object: {"output": …} or
// {"error": …} by the API's convention, else the whole object.
func gemResult(raw json.RawMessage) (ToolResult, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return ToolResult{}, fmt.Errorf("response is not a JSON object: %w", err)
	}
	str := func(v json.RawMessage) string {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v)
	}
	if v, ok := obj["error"]; ok {
		return ToolResult{Content: str(v), IsError: true}, nil
	}
	if v, ok := obj["output"]; ok {
		return ToolResult{Content: str(v)}, nil
	}
	return ToolResult{Content: string(raw)}, nil
}

type gemOutCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type gemOutPart struct {
	Text             string      `json:"text,omitempty"`
	FunctionCall     *gemOutCall `json:"functionCall,omitempty"`
	ThoughtSignature string      `json:"thoughtSignature,omitempty"`
}

type gemCandidate struct {
	Content struct {
		Parts []gemOutPart `json:"parts"`
		Role  string       `json:"role"`
	} `json:"content"`
	FinishReason string `json:"finishReason"`
	Index        int    `json:"index"`
}

type gemResponse struct {
	Candidates    []gemCandidate `json:"candidates"`
	UsageMetadata struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
		CachedContentTokens  int `json:"cachedContentTokenCount,omitempty"`
		PromptTokensDetails  []struct {
			Modality   string `json:"modality"`
			TokenCount int    `json:"tokenCount"`
		} `json:"promptTokensDetails"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
}

// GeminiSignature is the thoughtSignature the fake attaches to the first
// function call of answer number id, as Gemini 2.5 and later do; a client
// must send it back with that call.
func GeminiSignature(id uint64) string {
	return base64.StdEncoding.EncodeToString([]byte("fakellm-thought-" + strconv.FormatUint(id, 10)))
}

func geminiResponse(req *Request, r Reply, id uint64) *gemResponse {
	out := &gemResponse{ModelVersion: req.Model, ResponseID: fmt.Sprintf("fake-response-%d", id)}
	out.Candidates = make([]gemCandidate, 1)
	c := &out.Candidates[0]
	c.Content.Role = "model"
	c.Content.Parts = []gemOutPart{}
	c.FinishReason = "STOP" // Gemini says STOP for function calls too
	if r.text != "" {
		c.Content.Parts = append(c.Content.Parts, gemOutPart{Text: r.text})
	}
	for i, call := range r.calls {
		p := gemOutPart{FunctionCall: &gemOutCall{ID: call.ID, Name: call.Name, Args: call.Args}}
		if i == 0 {
			p.ThoughtSignature = GeminiSignature(id)
		}
		c.Content.Parts = append(c.Content.Parts, p)
	}
	if r.maxTokens {
		c.FinishReason = "MAX_TOKENS"
	}
	in, o := r.usageFor(req.Body)
	u := &out.UsageMetadata
	u.PromptTokenCount, u.CandidatesTokenCount, u.TotalTokenCount = in, o, in+o
	u.CachedContentTokens = r.cached
	u.PromptTokensDetails = append(u.PromptTokensDetails, struct {
		Modality   string `json:"modality"`
		TokenCount int    `json:"tokenCount"`
	}{"TEXT", in})
	return out
}

// gemStatus is the google.rpc status name the Gemini API uses for an HTTP status.
func gemStatus(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if code >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

func geminiError(r Reply) map[string]any {
	msg := r.errMsg
	if r.tooLong {
		msg = "The input token count (1196265) exceeds the maximum number of tokens allowed (1048576)."
	}
	status := gemStatus(r.status)
	if r.errCode != "" {
		status = r.errCode
	}
	e := map[string]any{"code": r.status, "message": msg, "status": status}
	if r.retryAfter > 0 {
		e["details"] = []any{map[string]any{
			"@type":      "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": strconv.FormatFloat(r.retryAfter.Seconds(), 'f', -1, 64) + "s",
		}}
	}
	return map[string]any{"error": e}
}
