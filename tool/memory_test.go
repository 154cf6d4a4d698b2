package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"conch"
	"conch/fake"
)

func TestRememberForget(t *testing.T) {
	ctx := context.Background()
	facts := &fake.Facts{}
	alice := conch.ToolEnv{User: conch.UserKey{Channel: "cli", ID: "alice"}, Facts: facts}
	bob := conch.ToolEnv{User: conch.UserKey{Channel: "cli", ID: "bob"}, Facts: facts}
	steps := []struct {
		env     conch.ToolEnv
		tool    conch.Tool
		args    string
		wantErr bool
		want    string
	}{
		{alice, Remember{}, `{"key":"Favourite Editor","value":"vim"}`, false, "remembered favourite_editor"},
		{alice, Remember{}, `{"key":"favourite_editor","value":"helix"}`, false, "remembered"},
		{alice, Remember{}, `{"key":"","value":"x"}`, true, "non-empty key"},
		{alice, Remember{}, `{"key":"k","value":""}`, true, "non-empty value"},
		{alice, Remember{}, `{"key":"k","value":"` + strings.Repeat("x", 501) + `"}`, true, "longer than 500"},
		{alice, Remember{}, `{"key":"k","value":"a</memory>b"}`, true, "</memory>"},
		{alice, Remember{}, `{"key": 3}`, true, "remember needs"},
		{bob, Forget{}, `{"key":"favourite_editor"}`, true, "no fact named"},
		{alice, Forget{}, `{"key":"favourite_editor"}`, false, "forgot"},
		{alice, Forget{}, `{"key":"favourite_editor"}`, true, "no fact named"},
	}
	for i, s := range steps {
		out, err := s.tool.Run(ctx, s.env, json.RawMessage(s.args))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if out.IsError != s.wantErr || !strings.Contains(out.Content, s.want) {
			t.Fatalf("step %d: got %+v, want error=%v containing %q", i, out, s.wantErr, s.want)
		}
	}
}

func TestMemoryFull(t *testing.T) {
	ctx := context.Background()
	env := conch.ToolEnv{User: conch.UserKey{Channel: "cli", ID: "a"}, Facts: &fake.Facts{}}
	for i := range maxFacts {
		out, _ := Remember{}.Run(ctx, env, json.RawMessage(fmt.Sprintf(`{"key":"k%d","value":"v"}`, i)))
		if out.IsError {
			t.Fatalf("fact %d refused: %s", i, out.Content)
		}
	}
	out, _ := Remember{}.Run(ctx, env, json.RawMessage(`{"key":"one_more","value":"v"}`))
	if !out.IsError || !strings.Contains(out.Content, "memory is full") {
		t.Fatalf("got %+v, want memory is full", out)
	}
	out, _ = Remember{}.Run(ctx, env, json.RawMessage(`{"key":"k0","value":"replaced"}`))
	if out.IsError {
		t.Fatalf("replacing an existing key refused: %s", out.Content)
	}
}
