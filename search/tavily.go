package search

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
)

// Tavily is the Tavily Search API (POST /search, Bearer key).
type Tavily struct{ c Config }

// TavilyURL is Tavily's public endpoint.
const TavilyURL = "https://api.tavily.com"

// Name implements Backend.
func (*Tavily) Name() string { return "tavily" }

// Search implements Backend.
func (t *Tavily) Search(ctx context.Context, q Query) ([]Result, error) {
	depth := t.c.Depth
	if depth == "" {
		depth = "basic"
	}
	body, err := json.Marshal(map[string]any{
		"query": q.Text, "max_results": q.Count, "search_depth": depth, "topic": "general",
		"include_answer": false, "include_images": false, "include_raw_content": false,
	})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint(t.c.BaseURL, TavilyURL, "/search"), bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Backend: "tavily", Msg: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+t.c.APIKey)
	var resp struct {
		Results []struct {
			Title   string  `json:"title"`
			URL     string  `json:"url"`
			Content string  `json:"content"`
			Score   float64 `json:"score"`
		} `json:"results"`
	}
	if err := do(t.c.HTTPClient, "tavily", req, &resp); err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(resp.Results))
	for _, r := range resp.Results {
		out = append(out, Result{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return out, nil
}
