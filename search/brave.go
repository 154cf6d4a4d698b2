package search

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Brave is the Brave Search web API (GET /res/v1/web/search,
// X-Subscription-Token).
type Brave struct{ c Config }

// BraveURL is Brave Search's public endpoint.
const BraveURL = "https://api.search.brave.com"

// Name implements Backend.
func (*Brave) Name() string { return "brave" }

// Search implements Backend.
func (b *Brave) Search(ctx context.Context, q Query) ([]Result, error) {
	count := q.Count
	if count > 20 {
		count = 20 // the API's maximum
	}
	v := url.Values{"q": {q.Text}, "count": {strconv.Itoa(count)}, "text_decorations": {"false"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint(b.c.BaseURL, BraveURL, "/res/v1/web/search")+"?"+v.Encode(), nil)
	if err != nil {
		return nil, &Error{Backend: "brave", Msg: err.Error()}
	}
	req.Header.Set("X-Subscription-Token", b.c.APIKey)
	var resp struct {
		Web struct {
			Results []struct {
				Title         string   `json:"title"`
				URL           string   `json:"url"`
				Description   string   `json:"description"`
				ExtraSnippets []string `json:"extra_snippets"`
			} `json:"results"`
		} `json:"web"`
	}
	if err := do(b.c.HTTPClient, "brave", req, &resp); err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(resp.Web.Results))
	for _, r := range resp.Web.Results {
		out = append(out, Result{Title: r.Title, URL: r.URL, Snippet: r.Description})
	}
	return out, nil
}
