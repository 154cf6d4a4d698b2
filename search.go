package conch

import (
	"context"
	"fmt"
)

// SearchBackend searches the web for the web_search tool; the search
// package's adapters (Tavily, Brave Search, SearXNG) implement it.
type SearchBackend interface {
	Name() string
	Search(ctx context.Context, q SearchQuery) ([]SearchResult, error)
}

// SearchQuery is one search.
type SearchQuery struct {
	Text  string
	Count int
}

// SearchResult is one search hit.
type SearchResult struct {
	Title   string
	URL     string
	Snippet string
}

// SearchError is a backend's failure, with text safe to show the model.
type SearchError struct {
	Backend string
	Status  int
	Msg     string
}

func (e *SearchError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s: HTTP %d: %s", e.Backend, e.Status, e.Msg)
	}
	return e.Backend + ": " + e.Msg
}
