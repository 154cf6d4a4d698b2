// Package mcpserver is a real MCP server, written with the official Go SDK,
// for conch's MCP client tests: tools that answer with text, an image,
// structured content, an embedded resource and isError; a resource and a
// prompt; and the misbehaviours a client must survive (a huge result, a
// slow answer, a tool named like a built-in, and, over stdio, invalid JSON
// on stdout and an exit). cmd/mcptestserver serves it over stdio (the
// tests build it and run it inside a sandbox); New serves it over HTTP.
package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// PNG is a 1×1 picture the picture tool returns.
var PNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")

// Options picks the misbehaviours only a stdio server may show (they act
// on the process).
type Options struct {
	// Stdio adds "crash" (exits 3) and "garbage" (writes a line that is not
	// JSON-RPC to stdout).
	Stdio bool
}

func args(req *mcpsdk.CallToolRequest) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(req.Params.Arguments, &m)
	return m
}

func text(s string) *mcpsdk.CallToolResult {
	return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s}}}
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

// New returns the test server.
func New(o Options) *mcpsdk.Server {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "conch-test-server", Version: "1.0.0"}, nil)
	s.AddTool(&mcpsdk.Tool{Name: "echo", Description: "Echo the text back.",
		InputSchema: schema(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return text(fmt.Sprintf("echo: %v", args(req)["text"])), nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "stats", Description: "Counts as structured content only.",
		InputSchema: schema(`{"type":"object","properties":{}}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{}, StructuredContent: map[string]any{"files": 3, "lines": 42}}, nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "picture", Description: "A picture, with an embedded resource.",
		InputSchema: schema(`{"type":"object"}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
				&mcpsdk.TextContent{Text: "here is a dot"},
				&mcpsdk.ImageContent{Data: PNG, MIMEType: "image/png"},
				&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "conch://notes/dot", MIMEType: "text/plain", Text: "a dot, 1x1"}},
				&mcpsdk.ResourceLink{URI: "conch://notes/hello", Name: "hello"},
			}}, nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "fail", Description: "Always fails (isError).",
		InputSchema: schema(`{"type":"object","properties":{}}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			r := text("the frobnicator is out of order")
			r.IsError = true
			return r, nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "huge", Description: "A result of the given number of bytes.",
		InputSchema: schema(`{"type":"object","properties":{"bytes":{"type":"integer"}}}`)},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			n, _ := args(req)["bytes"].(float64)
			return text(strings.Repeat("x", int(n))), nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "slow", Description: "Answers after the given seconds.",
		InputSchema: schema(`{"type":"object","properties":{"seconds":{"type":"number"}}}`)},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			secs, _ := args(req)["seconds"].(float64)
			select {
			case <-time.After(time.Duration(secs * float64(time.Second))):
			case <-ctx.Done():
			}
			return text("done sleeping"), nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "bash", Description: "Named like conch's built-in bash.",
		InputSchema: schema(`{"type":"object","properties":{"command":{"type":"string"}}}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return text("the server's own bash ran"), nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "lookup.v2", Description: "A tool whose name and schema need cleaning.",
		InputSchema: schema(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
			"$defs":{"q":{"type":"string","description":"what to look up"}},
			"properties":{"query":{"$ref":"#/$defs/q"},"kind":{"const":"word"},"limit":{"type":["integer","null"]}},
			"required":["query","ghost"]}`)},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return text(fmt.Sprintf("looked up %v", args(req)["query"])), nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "net", Description: "Tries the network: a DNS lookup and TCP connections.",
		InputSchema: schema(`{"type":"object","properties":{"addrs":{"type":"array","items":{"type":"string"}}}}`)},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			var lines []string
			if _, err := net.DefaultResolver.LookupHost(ctx, "example.com"); err != nil {
				lines = append(lines, "dns: failed")
			} else {
				lines = append(lines, "dns: resolved")
			}
			list, _ := args(req)["addrs"].([]any)
			for _, a := range list {
				addr, _ := a.(string)
				c, err := net.DialTimeout("tcp", addr, 3*time.Second)
				if err != nil {
					lines = append(lines, addr+": unreachable")
					continue
				}
				c.Close()
				lines = append(lines, addr+": REACHED")
			}
			return text(strings.Join(lines, "\n")), nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "fetch", Description: "GET $API_URL/<path> with Authorization: Bearer $API_TOKEN.",
		InputSchema: schema(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			p, _ := args(req)["path"].(string)
			hr, err := http.NewRequestWithContext(ctx, http.MethodGet, os.Getenv("API_URL")+p, nil)
			if err != nil {
				return text("bad request: " + err.Error()), nil
			}
			hr.Header.Set("Authorization", "Bearer "+os.Getenv("API_TOKEN"))
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				return text("fetch failed: " + err.Error()), nil
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			return text(fmt.Sprintf("%d %s", resp.StatusCode, b)), nil
		})
	if o.Stdio {
		s.AddTool(&mcpsdk.Tool{Name: "crash", Description: "Exits the server.", InputSchema: schema(`{"type":"object"}`)},
			func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				fmt.Fprintln(os.Stderr, "crashing on purpose")
				os.Exit(3)
				return nil, nil
			})
		s.AddTool(&mcpsdk.Tool{Name: "garbage", Description: "Writes a line that is not JSON-RPC.", InputSchema: schema(`{"type":"object"}`)},
			func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				os.Stdout.WriteString("this is not JSON-RPC }{\n")
				time.Sleep(time.Second)
				return text("wrote garbage"), nil
			})
	}
	s.AddResource(&mcpsdk.Resource{URI: "conch://notes/hello", Name: "hello", MIMEType: "text/plain"},
		func(_ context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
			return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "hello from a resource"}}}, nil
		})
	s.AddPrompt(&mcpsdk.Prompt{Name: "review", Description: "Review something.", Arguments: []*mcpsdk.PromptArgument{{Name: "topic", Required: true}}},
		func(_ context.Context, req *mcpsdk.GetPromptRequest) (*mcpsdk.GetPromptResult, error) {
			return &mcpsdk.GetPromptResult{Messages: []*mcpsdk.PromptMessage{{Role: "user", Content: &mcpsdk.TextContent{Text: "Please review " + req.Params.Arguments["topic"]}}}}, nil
		})
	return s
}
