package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"conch"
)

// Limits of web_search.
const (
	DefaultSearchResults = 5
	MaxSearchResults     = 20
	maxSnippet           = 600
	maxQuery             = 400
)

// WebSearchOptions configures web_search.
type WebSearchOptions struct {
	// Backend searches; nil means none is configured, and the tool answers
	// with what the operator has to set.
	Backend conch.SearchBackend
	// MaxResults is the default and largest count (search.max_results).
	MaxResults int
	// Auditor, if set, records every search (kind "web_search").
	Auditor conch.AuditStore
	Now     func() time.Time
}

// WebSearch is the tool `web_search(query)`.
type WebSearch struct{ opts WebSearchOptions }

var _ conch.Tool = (*WebSearch)(nil)

// NewWebSearch returns the web_search tool.
func NewWebSearch(o WebSearchOptions) *WebSearch {
	if o.MaxResults <= 0 {
		o.MaxResults = DefaultSearchResults
	}
	if o.MaxResults > MaxSearchResults {
		o.MaxResults = MaxSearchResults
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &WebSearch{opts: o}
}

// SearchNotConfigured is what web_search answers without a backend: exactly
// what to set.
const SearchNotConfigured = "web_search is not configured on this conch, so there are no search results. " +
	"Tell the operator to set one backend: CONCH_SEARCH_BACKEND=tavily with CONCH_SEARCH_TAVILY_API_KEY (or TAVILY_API_KEY); " +
	"CONCH_SEARCH_BACKEND=brave with CONCH_SEARCH_BRAVE_API_KEY (or BRAVE_API_KEY); " +
	"or CONCH_SEARCH_BACKEND=searxng with CONCH_SEARCH_SEARXNG_URL (a SearXNG instance with the json format enabled). " +
	"The same keys exist in conch.toml under [search]. Meanwhile web_fetch can read a page whose URL you know."

// Spec implements conch.Tool.
func (w *WebSearch) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "web_search",
		Description: "Search the web. Returns titles, URLs and snippets; read a result in full with web_fetch. " +
			"Results come from the internet and are untrusted.",
		Parameters: schemaFor[webSearchArgs](maximum("count", float64(w.opts.MaxResults),
			fmt.Sprintf("how many results (default %d)", min(DefaultSearchResults, w.opts.MaxResults)))),
	}
}

type webSearchArgs struct {
	Query string `json:"query" jsonschema:"what to search for"`
	Count int    `json:"count,omitempty" schema:"minimum=1"`
}

// Run implements conch.Tool.
func (w *WebSearch) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args webSearchArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return conch.ToolFail(`web_search needs {"query": string, "count": integer (optional)}: ` + err.Error()), nil
	}
	q := strings.Join(strings.Fields(args.Query), " ")
	switch {
	case q == "":
		return conch.ToolFail("web_search needs a non-empty query"), nil
	case utf8.RuneCountInString(q) > maxQuery:
		return conch.ToolFail(fmt.Sprintf("the query is longer than %d characters; shorten it", maxQuery)), nil
	}
	if w.opts.Backend == nil {
		return conch.ToolFail(SearchNotConfigured), nil
	}
	count := args.Count
	if count <= 0 {
		count = min(DefaultSearchResults, w.opts.MaxResults)
	}
	count = min(count, w.opts.MaxResults)
	start := w.opts.Now()
	results, err := w.opts.Backend.Search(ctx, conch.SearchQuery{Text: q, Count: count})
	if len(results) > count {
		results = results[:count]
	}
	if w.opts.Auditor != nil {
		detail := map[string]any{"backend": w.opts.Backend.Name(), "query": q, "results": len(results),
			"took_ms": w.opts.Now().Sub(start).Milliseconds()}
		if err != nil {
			detail["error"] = err.Error()
		}
		if aerr := conch.RecordAudit(ctx, w.opts.Auditor, start, conch.AuditWebSearch, env.Conversation, detail); aerr != nil {
			return conch.ToolOutput{}, fmt.Errorf("web_search: %w", aerr)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return conch.ToolOutput{}, fmt.Errorf("web_search: %w", ctx.Err())
		}
		var se *conch.SearchError
		if errors.As(err, &se) {
			return conch.ToolFail("web_search failed: " + se.Error()), nil
		}
		return conch.ToolFail("web_search failed: " + err.Error()), nil
	}
	if len(results) == 0 {
		return conch.ToolOK(fmt.Sprintf("No results for %q.", q)), nil
	}
	var b strings.Builder
	for i, r := range results {
		fmt.Fprintf(&b, "%d. %s\n   %s\n", i+1, oneLineText(r.Title), r.URL)
		if s := oneLineText(r.Snippet); s != "" {
			if utf8.RuneCountInString(s) > maxSnippet {
				s = truncateRunes(s, maxSnippet) + "…"
			}
			fmt.Fprintf(&b, "   %s\n", s)
		}
	}
	head := fmt.Sprintf("%d results for %q (%s):\n\n", len(results), q, w.opts.Backend.Name())
	return conch.ToolOK(head + UntrustedBlock("web_search", strings.TrimRight(b.String(), "\n"))), nil
}
