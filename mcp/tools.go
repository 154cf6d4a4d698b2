package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"conch"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverTool is one tool of one server.
type serverTool struct {
	c    *Client
	srv  *Server
	tool *mcpsdk.Tool
}

var _ conch.Tool = (*serverTool)(nil)

// maxDescription bounds a tool's description as the model sees it.
const maxDescription = 2000

func (t *serverTool) Spec() conch.ToolSpec {
	raw, _ := json.Marshal(t.tool.InputSchema)
	params, err := CleanSchema(raw)
	if err != nil {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	desc := t.tool.Description
	if desc == "" {
		desc = t.tool.Title
	}
	desc = clipText(strings.TrimSpace(desc), maxDescription)
	desc = fmt.Sprintf("[MCP server %s, tool %s] %s", t.srv.Name, t.tool.Name, desc)
	return conch.ToolSpec{Name: ToolName(t.srv.Name, t.tool.Name), Description: desc, Parameters: params}
}

func (t *serverTool) Run(ctx context.Context, env conch.ToolEnv, args json.RawMessage) (conch.ToolOutput, error) {
	var arguments map[string]any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &arguments); err != nil {
			return conch.ToolFail("the arguments are not a JSON object: " + err.Error()), nil
		}
	}
	return t.c.do(ctx, env, t.srv, t.tool.Name, func(ctx context.Context, sess *mcpsdk.ClientSession) (conch.ToolOutput, error) {
		res, err := sess.CallTool(ctx, &mcpsdk.CallToolParams{Name: t.tool.Name, Arguments: arguments})
		if err != nil {
			return conch.ToolOutput{}, err
		}
		return callOutput(res, t.c.o.MaxResultChars), nil
	})
}

// do runs one request to a server for env's conversation: it starts the
// server when needed, bounds the request by the server's timeout, maps
// every failure to a result the model reads, and audits and counts it.
func (c *Client) do(ctx context.Context, env conch.ToolEnv, s *Server, what string, f func(context.Context, *mcpsdk.ClientSession) (conch.ToolOutput, error)) (conch.ToolOutput, error) {
	start := c.o.Now()
	out, err := c.run(ctx, env, s, f)
	took := c.o.Now().Sub(start)
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "error"
	case out.IsError:
		outcome = "tool_error"
	}
	detail := map[string]any{"server": s.Name, "tool": what, "duration_ms": took.Milliseconds(), "outcome": outcome}
	if err != nil {
		detail["error"] = clipText(err.Error(), 300)
	}
	if aerr := conch.RecordAudit(ctx, c.o.Audit, start, conch.AuditMCPClientCall, env.Conversation, detail); aerr != nil {
		c.o.Logger.Warn("audit mcp call", "err", aerr)
	}
	if c.o.OnCall != nil {
		c.o.OnCall(CallEvent{Server: s.Name, Tool: what, Duration: took, Outcome: outcome})
	}
	if err != nil {
		if ctx.Err() != nil {
			return conch.ToolOutput{}, context.Cause(ctx)
		}
		c.o.Logger.Warn("mcp call failed", "server", s.Name, "tool", what, "conversation", env.Conversation, "err", err)
		return conch.ToolFail(c.scrub(s, fmt.Sprintf("MCP server %s could not run %s: %v", s.Name, what, err))), nil
	}
	out.Content = c.scrub(s, out.Content)
	return out, nil
}

// scrub removes the server's credentials from text the model reads: the
// configured token (the agent redacts configured secrets too) and the
// OAuth access token last sent, which changes.
func (c *Client) scrub(s *Server, text string) string {
	if s.Token != "" {
		text = strings.ReplaceAll(text, s.Token, "[REDACTED]")
	}
	if tt := c.oauthTokens[s.Name]; tt != nil {
		if p := tt.last.Load(); p != nil && len(*p) >= 8 {
			text = strings.ReplaceAll(text, *p, "[REDACTED]")
		}
	}
	return text
}

// sessionEndGrace is how long a failed call waits for its session's
// watcher to notice that the session ended (when it did).
const sessionEndGrace = 200 * time.Millisecond

func (c *Client) run(ctx context.Context, env conch.ToolEnv, s *Server, f func(context.Context, *mcpsdk.ClientSession) (conch.ToolOutput, error)) (conch.ToolOutput, error) {
	if !s.Offered(env.Conversation) {
		return conch.ToolOutput{}, errors.New("this conversation is not offered the server")
	}
	cn, err := c.connFor(s, env.Conversation, env.Sandboxes)
	if err != nil {
		return conch.ToolOutput{}, err
	}
	done := cn.use()
	defer done()
	sess, err := cn.session(ctx)
	if err != nil {
		return conch.ToolOutput{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	out, err := f(cctx, sess)
	switch {
	case err == nil:
		return out, nil
	case ctx.Err() != nil:
		return out, err
	case cctx.Err() != nil:
		return out, fmt.Errorf("no answer within %s", s.timeout())
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		// The server answered with an error: it is alive.
		return out, fmt.Errorf("the server answered with error %d: %s", rpcErr.Code, clipText(rpcErr.Message, 1000))
	}
	// Anything else (the server ended, the connection closed, output that
	// is not JSON-RPC) leaves the session unusable: start again on the
	// next use. It is marked down before the call returns, so that what
	// the model is told and /status agree.
	if errors.As(err, new(serverEnded)) || errors.Is(err, mcpsdk.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "closed") || strings.Contains(err.Error(), "unmarshal") {
		cn.broken(sess, err)
		return out, err
	}
	// Others end the session from inside the SDK (a frame too long, a line
	// that is not JSON): its watcher notices; give it a moment.
	select {
	case <-cn.goneOf(sess):
	case <-time.After(sessionEndGrace):
	}
	return out, err
}

// resourceTool reads a resource of one of the servers.
type resourceTool struct {
	c       *Client
	servers []string
}

var _ conch.Tool = (*resourceTool)(nil)

// ResourceToolName is the tool that reads MCP resources; it cannot collide
// with a server's tools (those start with Prefix) or a built-in.
const ResourceToolName = "mcp_read_resource"

// PromptToolName is the tool that gets an MCP server's prompt.
const PromptToolName = "mcp_get_prompt"

func (t *resourceTool) Spec() conch.ToolSpec {
	var b strings.Builder
	b.WriteString("Read a resource (a file, a record, a page) of an MCP server by its URI. Known resources:")
	for _, s := range t.servers {
		cat := t.c.knownCatalog(s)
		if cat == nil {
			continue
		}
		for _, r := range cat.resources {
			fmt.Fprintf(&b, "\n- %s %s", s, r.URI)
			if r.Name != "" {
				b.WriteString(" (" + clipText(r.Name, 80) + ")")
			}
		}
	}
	return conch.ToolSpec{Name: ResourceToolName, Description: b.String(), Parameters: serverArgSchema(t.servers, map[string]any{
		"uri": map[string]any{"type": "string", "description": "the resource's URI"},
	}, "uri")}
}

func (t *resourceTool) Run(ctx context.Context, env conch.ToolEnv, args json.RawMessage) (conch.ToolOutput, error) {
	var a struct{ Server, URI string }
	if err := json.Unmarshal(args, &a); err != nil || a.Server == "" || a.URI == "" {
		return conch.ToolFail(`want {"server": "<name>", "uri": "<uri>"}`), nil
	}
	s := t.c.server(a.Server)
	if s == nil {
		return conch.ToolFail(fmt.Sprintf("no MCP server %q; servers with resources: %s", a.Server, strings.Join(t.servers, ", "))), nil
	}
	return t.c.do(ctx, env, s, "resources/read", func(ctx context.Context, sess *mcpsdk.ClientSession) (conch.ToolOutput, error) {
		res, err := sess.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: a.URI})
		if err != nil {
			return conch.ToolOutput{}, err
		}
		var r result
		for _, rc := range res.Contents {
			r.resource(rc)
		}
		if r.b.Len() == 0 && len(r.images) == 0 {
			r.line("(the resource is empty)")
		}
		return r.output(false, t.c.o.MaxResultChars), nil
	})
}

// promptTool gets a prompt of one of the servers: the messages it renders
// are read by the model as the tool's result.
type promptTool struct {
	c       *Client
	servers []string
}

var _ conch.Tool = (*promptTool)(nil)

func (t *promptTool) Spec() conch.ToolSpec {
	var b strings.Builder
	b.WriteString("Get a prompt (a prepared instruction with the server's context) of an MCP server. Prompts:")
	for _, s := range t.servers {
		cat := t.c.knownCatalog(s)
		if cat == nil {
			continue
		}
		for _, p := range cat.prompts {
			fmt.Fprintf(&b, "\n- %s %s", s, p.Name)
			var as []string
			for _, a := range p.Arguments {
				n := a.Name
				if a.Required {
					n += "*"
				}
				as = append(as, n)
			}
			if len(as) > 0 {
				b.WriteString("(" + strings.Join(as, ", ") + ")")
			}
			if p.Description != "" {
				b.WriteString(": " + clipText(p.Description, 120))
			}
		}
	}
	return conch.ToolSpec{Name: PromptToolName, Description: b.String(), Parameters: serverArgSchema(t.servers, map[string]any{
		"name":      map[string]any{"type": "string", "description": "the prompt's name"},
		"arguments": map[string]any{"type": "object", "description": "the prompt's arguments (strings); * marks required ones", "additionalProperties": map[string]any{"type": "string"}},
	}, "name")}
}

func (t *promptTool) Run(ctx context.Context, env conch.ToolEnv, args json.RawMessage) (conch.ToolOutput, error) {
	var a struct {
		Server, Name string
		Arguments    map[string]string
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Server == "" || a.Name == "" {
		return conch.ToolFail(`want {"server": "<name>", "name": "<prompt>", "arguments": {...}}`), nil
	}
	s := t.c.server(a.Server)
	if s == nil {
		return conch.ToolFail(fmt.Sprintf("no MCP server %q; servers with prompts: %s", a.Server, strings.Join(t.servers, ", "))), nil
	}
	return t.c.do(ctx, env, s, "prompts/get "+a.Name, func(ctx context.Context, sess *mcpsdk.ClientSession) (conch.ToolOutput, error) {
		res, err := sess.GetPrompt(ctx, &mcpsdk.GetPromptParams{Name: a.Name, Arguments: a.Arguments})
		if err != nil {
			return conch.ToolOutput{}, err
		}
		var r result
		if res.Description != "" {
			r.line(res.Description)
		}
		for _, m := range res.Messages {
			r.line("[" + string(m.Role) + "]")
			r.content([]mcpsdk.Content{m.Content})
		}
		return r.output(false, t.c.o.MaxResultChars), nil
	})
}

func serverArgSchema(servers []string, props map[string]any, required string) json.RawMessage {
	sorted := append([]string(nil), servers...)
	sort.Strings(sorted)
	p := map[string]any{"server": map[string]any{"type": "string", "enum": sorted, "description": "the MCP server"}}
	for k, v := range props {
		p[k] = v
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": p, "required": []string{"server", required}})
	return b
}

// Ping checks a server for `conch mcp test` and `conch doctor`: it starts
// it (for a stdio server, in the sandbox sandboxes gives key), pings it and
// returns its tools as offered.
func (c *Client) Ping(ctx context.Context, name string, key conch.ConversationKey, sandboxes conch.SandboxProvider) ([]conch.ToolSpec, time.Duration, error) {
	s := c.server(name)
	if s == nil {
		return nil, 0, fmt.Errorf("no MCP server %q is configured", name)
	}
	start := c.o.Now()
	cn, err := c.connFor(s, key, sandboxes)
	if err != nil {
		return nil, 0, err
	}
	done := cn.use()
	defer done()
	sess, err := cn.session(ctx)
	if err != nil {
		return nil, 0, err
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	if err := sess.Ping(pctx, nil); err != nil {
		return nil, 0, fmt.Errorf("ping: %w", err)
	}
	took := c.o.Now().Sub(start)
	var specs []conch.ToolSpec
	for _, t := range c.Tools(ctx, conch.ToolEnv{Conversation: key, Sandboxes: sandboxes}) {
		if st, ok := t.(*serverTool); ok && st.srv.Name == name {
			specs = append(specs, t.Spec())
		}
	}
	return specs, took, nil
}
