package fakellm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"conch/internal/testenv/fakellm"
)

// TestModelListsWithOfficialSDKs: the model-list endpoints answer each
// provider's official SDK (pagination included) and refuse a wrong key as
// the provider does.
func TestModelListsWithOfficialSDKs(t *testing.T) {
	ctx := context.Background()
	srv := fakellm.New(t)
	srv.SetModels("m-one", "m-two")
	srv.RequireKey("good")

	oai := func(key string) *openai.Client {
		c := openai.NewClient(ooption.WithBaseURL(srv.BaseURL(fakellm.OpenAI)), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
		return &c
	}
	var got []string
	iter := oai("good").Models.ListAutoPaging(ctx)
	for iter.Next() {
		got = append(got, iter.Current().ID)
	}
	if err := iter.Err(); err != nil || len(got) != 2 || got[0] != "m-one" {
		t.Fatalf("openai: %v %v", got, err)
	}
	if _, err := oai("bad").Models.List(ctx); err == nil {
		t.Fatal("openai: a wrong key was accepted")
	} else if apiErr := (*openai.Error)(nil); !asErr(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Fatalf("openai: wrong key: %v", err)
	}

	ant := func(key string) *anthropic.Client {
		c := anthropic.NewClient(aoption.WithBaseURL(srv.BaseURL(fakellm.Anthropic)), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
		return &c
	}
	got = nil
	aiter := ant("good").Models.ListAutoPaging(ctx, anthropic.ModelListParams{})
	for aiter.Next() {
		got = append(got, aiter.Current().ID)
	}
	if err := aiter.Err(); err != nil || len(got) != 2 || got[1] != "m-two" {
		t.Fatalf("anthropic: %v %v", got, err)
	}
	if _, err := ant("bad").Models.List(ctx, anthropic.ModelListParams{}); err == nil {
		t.Fatal("anthropic: a wrong key was accepted")
	} else if apiErr := (*anthropic.Error)(nil); !asErr(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("anthropic: wrong key: %v", err)
	}

	gem := func(key string) *genai.Client {
		c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: srv.BaseURL(fakellm.Gemini)}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	got = nil
	for m, err := range gem("good").Models.All(ctx) {
		if err != nil {
			t.Fatalf("gemini: %v", err)
		}
		got = append(got, m.Name)
	}
	if len(got) != 2 || got[0] != "models/m-one" {
		t.Fatalf("gemini: %v", got)
	}
	if _, err := gem("bad").Models.List(ctx, nil); err == nil {
		t.Fatal("gemini: a wrong key was accepted")
	} else if apiErr := (genai.APIError{}); !asErr(err, &apiErr) || apiErr.Code != 400 {
		t.Fatalf("gemini: wrong key: %v", err)
	}
	if n := srv.Count(); n != 0 {
		t.Fatalf("model lists counted as %d model calls", n)
	}
}

func asErr[T any](err error, target *T) bool { return errors.As(err, target) }
