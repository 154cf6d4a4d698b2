package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"conch/config"
)

// listModels asks the provider's model-list endpoint, which costs no tokens,
// for the models m's key may use: it proves the key (doctor, conch init). The
// key goes in a header, never in an error.
func listModels(ctx context.Context, m config.ModelConfig) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var (
		req *http.Request
		err error
	)
	switch m.Provider {
	case "openai":
		base := strings.TrimRight(orDefault(m.BaseURL, "https://api.openai.com/v1"), "/")
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
		if err == nil && m.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+m.APIKey)
		}
	case "anthropic":
		base := strings.TrimRight(orDefault(m.BaseURL, "https://api.anthropic.com"), "/")
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models?limit=1000", nil)
		if err == nil {
			req.Header.Set("x-api-key", m.APIKey)
			req.Header.Set("anthropic-version", "2023-06-01")
		}
	case "gemini":
		base := strings.TrimRight(orDefault(m.BaseURL, "https://generativelanguage.googleapis.com"), "/")
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1beta/models?pageSize=1000", nil)
		if err == nil {
			req.Header.Set("x-goog-api-key", m.APIKey)
		}
	default:
		return nil, fmt.Errorf("unknown provider %q (openai, anthropic or gemini)", m.Provider)
	}
	if err != nil {
		return nil, fmt.Errorf("model.base_url: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %w (check model.base_url and the network)", req.URL.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("read the model list from %s: %w", req.URL.Host, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden ||
		m.Provider == "gemini" && resp.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "API key"):
		return nil, fmt.Errorf("the API key was refused by %s (HTTP %d): check the key (model.api_key_file or CONCH_MODEL_API_KEY)", m.Provider, resp.StatusCode)
	case resp.StatusCode >= 400:
		return nil, fmt.Errorf("HTTP %d from %s: %s", resp.StatusCode, req.URL.Redacted(), strings.TrimSpace(string(body[:min(len(body), 300)])))
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		Models []struct {
			Name    string   `json:"name"`
			Methods []string `json:"supportedGenerationMethods"`
		} `json:"models"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("the model list from %s is not JSON: %w", req.URL.Host, err)
	}
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	for _, g := range list.Models {
		if len(g.Methods) == 0 || slices.Contains(g.Methods, "generateContent") {
			ids = append(ids, strings.TrimPrefix(g.Name, "models/"))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
