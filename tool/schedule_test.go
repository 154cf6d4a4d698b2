package tool_test

import (
	"regexp"
	"strings"
	"testing"

	"conch"
	"conch/schedule"
	"conch/sqlite/sqlitetest"
	"conch/tool"
)

func TestScheduleTool(t *testing.T) {
	sched, err := schedule.New(schedule.Options{Store: sqlitetest.MustOpenMemory(t)})
	if err != nil {
		t.Fatal(err)
	}
	st := &tool.Schedule{S: sched}
	env := conch.ToolEnv{Conversation: conch.ConversationKey{Channel: conch.ChannelCLI, ID: "s"}}
	other := conch.ToolEnv{Conversation: conch.ConversationKey{Channel: conch.ChannelCLI, ID: "other"}}

	out := runTool(t, st, env, `{"action":"after","delay":"45m","message":"look at the oven"}`)
	id := regexp.MustCompile(`s-[0-9a-f]{8}`).FindString(out.Content)
	if out.IsError || id == "" {
		t.Fatalf("after: %+v", out)
	}
	if out := runTool(t, st, env, `{"action":"cron","cron":"0 9 * * 1-5","message":"standup notes"}`); out.IsError || !strings.Contains(out.Content, `cron "0 9 * * 1-5"`) {
		t.Fatalf("cron: %+v", out)
	}
	for _, bad := range []struct{ args, want string }{
		{`{"action":"cron","cron":"every hour","message":"x"}`, "five fields"},
		{`{"action":"cron","cron":"* * * * *","message":"x"}`, "shortest interval"},
		{`{"action":"after","delay":"soon","message":"x"}`, "not a duration"},
		{`{"action":"at","time":"2001-01-01T00:00:00Z","message":"x"}`, "not in the future"},
		{`{"action":"at","time":"tomorrow","message":"x"}`, "RFC 3339"},
		{`{"action":"after","delay":"1h"}`, "give a `message`"},
		{`{"action":"cancel"}`, "give the `id`"},
		{`{"action":"sleep"}`, "unknown action"},
		{`{"action":"list","extra":1}`, "schedule takes"},
	} {
		if out := runTool(t, st, env, bad.args); !out.IsError || !strings.Contains(out.Content, bad.want) {
			t.Errorf("%s: %+v, want an error saying %q", bad.args, out, bad.want)
		}
	}
	if out := runTool(t, st, other, `{"action":"cancel","id":"`+id+`"}`); !out.IsError {
		t.Errorf("another conversation cancelled the wake: %+v", out)
	}
	if out := runTool(t, st, env, `{"action":"list"}`); !strings.Contains(out.Content, id) || !strings.Contains(out.Content, "look at the oven") || !strings.Contains(out.Content, "standup notes") {
		t.Errorf("list: %s", out.Content)
	}
	if out := runTool(t, st, env, `{"action":"cancel","id":"`+id+`"}`); out.IsError {
		t.Errorf("cancel: %+v", out)
	}
	if out := runTool(t, st, env, `{"action":"list"}`); strings.Contains(out.Content, id) {
		t.Errorf("list after cancel: %s", out.Content)
	}
	if out := runTool(t, &tool.Schedule{}, env, `{"action":"list"}`); !out.IsError || !strings.Contains(out.Content, "schedule.enabled") {
		t.Errorf("without a scheduler: %+v", out)
	}
}
