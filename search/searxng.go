package search

import (
	"context"
	"net/http"
	"net/url"
)

// SearXNG is a self-hosted SearXNG instance's JSON API (GET /search with
// format=json, which the instance must enable under search.formats).
type SearXNG struct{ c Config }

// Name implements Backend.
func (*SearXNG) Name() string { return "searxng" }

// Search implements Backend.
func (s *SearXNG) Search(ctx context.Context, q Query) ([]Result, error) {
	v := url.Values{"q": {q.Text}, "format": {"json"}, "pageno": {"1"}, "safesearch": {"1"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint(s.c.BaseURL, "", "/search")+"?"+v.Encode(), nil)
	if err != nil {
		return nil, &Error{Backend: "searxng", Msg: err.Error()}
	}
	var resp struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := do(s.c.HTTPClient, "searxng", req, &resp); err != nil {
		var e *Error
		if asError(err, &e) && e.Status == http.StatusForbidden {
			e.Msg += " (the instance refuses JSON: add json to search.formats in its settings.yml)"
		}
		return nil, err
	}
	out := make([]Result, 0, len(resp.Results))
	for _, r := range resp.Results {
		out = append(out, Result{Title: r.Title, URL: r.URL, Snippet: r.Content})
		if q.Count > 0 && len(out) == q.Count {
			break
		}
	}
	return out, nil
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}
