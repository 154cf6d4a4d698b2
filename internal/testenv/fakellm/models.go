package fakellm

import (
	"net/http"
	"strings"
	"time"
)

// DefaultModels are the models the list endpoints name until SetModels.
var DefaultModels = []string{"test-model", "test-model-mini"}

// models is what the model-list endpoints answer.
type models struct {
	ids []string
	key string // "" accepts every key
}

// SetModels sets the models the list endpoints name.
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models.ids = append([]string(nil), ids...)
}

// RequireKey makes the model-list endpoints refuse every other API key with
// the provider's 401, as a provider refuses a wrong key.
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models.key = key
}

// serveModels answers the providers' model-list endpoints, which cost no
// tokens and prove a key (conch init and doctor ask them):
//
//	OpenAI     GET /v1/models               Authorization: Bearer KEY
//	           {"object":"list","data":[{"id","object":"model","created","owned_by"}]}
//	Anthropic  GET /v1/models               x-api-key: KEY (or Authorization: Bearer), anthropic-version
//	           {"data":[{"id","type":"model","display_name","created_at"}],"has_more","first_id","last_id"}
//	Gemini     GET /v1beta/models           x-goog-api-key: KEY (or ?key=)
//	           {"models":[{"name":"models/ID","displayName","supportedGenerationMethods"}]}
//
// It reports whether r was such a request. They are not scripted and not
// recorded: they are not model calls.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	s.mu.Lock()
	ids := s.models.ids
	if ids == nil {
		ids = DefaultModels
	}
	want := s.models.key
	s.mu.Unlock()
	refuse := func(key string) bool { return want != "" && key != want }
	switch path := strings.TrimSuffix(r.URL.Path, "/"); {
	case path == "/v1/models" && r.Header.Get("anthropic-version") != "":
		key := r.Header.Get("x-api-key")
		if key == "" { // this SDK version sends the key as a bearer token
			key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		if refuse(key) {
			s.writeJSON(w, http.StatusUnauthorized, nil, map[string]any{"type": "error",
				"error": map[string]any{"type": "authentication_error", "message": "invalid x-api-key"}})
			return true
		}
		data := make([]map[string]any, len(ids))
		for i, id := range ids {
			data[i] = map[string]any{"id": id, "type": "model", "display_name": id, "created_at": time.Unix(1735689600, 0).UTC().Format(time.RFC3339)}
		}
		s.writeJSON(w, http.StatusOK, nil, map[string]any{"data": data, "has_more": false, "first_id": first(ids), "last_id": last(ids)})
	case path == "/v1/models":
		if refuse(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
			s.writeJSON(w, http.StatusUnauthorized, nil, map[string]any{"error": map[string]any{
				"message": "Incorrect API key provided.", "type": "invalid_request_error", "param": nil, "code": "invalid_api_key"}})
			return true
		}
		data := make([]map[string]any, len(ids))
		for i, id := range ids {
			data[i] = map[string]any{"id": id, "object": "model", "created": 1735689600, "owned_by": "fakellm"}
		}
		s.writeJSON(w, http.StatusOK, nil, map[string]any{"object": "list", "data": data})
	case path == "/v1beta/models" || path == "/v1/models:list":
		key := r.Header.Get("x-goog-api-key")
		if key == "" {
			key = r.URL.Query().Get("key")
		}
		if refuse(key) {
			s.writeJSON(w, http.StatusBadRequest, nil, map[string]any{"error": map[string]any{
				"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT"}})
			return true
		}
		ms := make([]map[string]any, len(ids))
		for i, id := range ids {
			ms[i] = map[string]any{"name": "models/" + id, "displayName": id, "supportedGenerationMethods": []string{"generateContent", "countTokens"}}
		}
		s.writeJSON(w, http.StatusOK, nil, map[string]any{"models": ms})
	default:
		return false
	}
	return true
}

func first(ids []string) any {
	if len(ids) == 0 {
		return nil
	}
	return ids[0]
}

func last(ids []string) any {
	if len(ids) == 0 {
		return nil
	}
	return ids[len(ids)-1]
}
