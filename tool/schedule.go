package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"conch"
	"conch/schedule"
)

// Schedule is the tool `schedule`: wake this conversation later, once or on
// a cron expression, with a message to itself; list and cancel wakes.
type Schedule struct{ S *schedule.Scheduler }

var _ conch.Tool = (*Schedule)(nil)

// Spec implements conch.Tool.
func (t *Schedule) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "schedule",
		Description: "Wake this conversation later with a message to yourself, delivered like a message from the person: " +
			"action \"at\" (an RFC 3339 time), \"after\" (a delay like 90m or 2h), or \"cron\" (five fields " +
			"\"minute hour day month weekday\" in UTC, or @hourly/@daily/\"@every 2h\") fires with `message`; your answer " +
			"then goes to the person. Write the message as an instruction to your future self (\"check the build in " +
			"terminal 0; tell the person only if it fails\"). \"list\" shows wakes and watches, \"cancel\" removes one by id. " +
			"Wakes survive restarts; one missed while conch was down fires once when it is back.",
		Parameters: schemaFor[scheduleArgs](),
	}
}

type scheduleArgs struct {
	Action  string `json:"action" schema:"enum=at|after|cron|list|cancel"`
	Time    string `json:"time,omitempty" jsonschema:"for at: RFC 3339, e.g. 2026-11-24T09:00:00Z"`
	Delay   string `json:"delay,omitempty" jsonschema:"for after: e.g. 45m, 2h"`
	Cron    string `json:"cron,omitempty" jsonschema:"for cron: e.g. \"0 * * * *\" (hourly)"`
	Message string `json:"message,omitempty" jsonschema:"for at/after/cron: what you will be told when it fires"`
	ID      string `json:"id,omitempty" jsonschema:"for cancel"`
}

// Run implements conch.Tool.
func (t *Schedule) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args scheduleArgs
	if err := unmarshalArgs(raw, &args); err != nil {
		return conch.ToolFail(`schedule takes {"action": "at"|"after"|"cron"|"list"|"cancel", "time"?, "delay"?, "cron"?, "message"?, "id"?}: ` + err.Error()), nil
	}
	if t.S == nil {
		return conch.ToolFail("scheduled wakes are turned off on this conch (schedule.enabled)"), nil
	}
	key := env.Conversation
	msg := strings.TrimSpace(args.Message)
	needMessage := func() *conch.ToolOutput {
		if msg == "" {
			out := conch.ToolFail("give a `message`: what you should be told when the wake fires")
			return &out
		}
		return nil
	}
	var (
		e   schedule.Entry
		err error
	)
	switch args.Action {
	case "list":
		return listSchedules(ctx, t.S, key)
	case "cancel":
		return cancelSchedule(ctx, t.S, key, args.ID)
	case "at":
		if out := needMessage(); out != nil {
			return *out, nil
		}
		at, perr := time.Parse(time.RFC3339, args.Time)
		if perr != nil {
			return conch.ToolFail(fmt.Sprintf("time %q is not RFC 3339 (e.g. 2026-11-24T09:00:00Z)", args.Time)), nil
		}
		e, err = t.S.At(ctx, key, at, msg)
	case "after":
		if out := needMessage(); out != nil {
			return *out, nil
		}
		d, perr := time.ParseDuration(args.Delay)
		if perr != nil {
			return conch.ToolFail(fmt.Sprintf("delay %q is not a duration (e.g. 45m, 2h, 1h30m)", args.Delay)), nil
		}
		e, err = t.S.After(ctx, key, d, msg)
	case "cron":
		if out := needMessage(); out != nil {
			return *out, nil
		}
		e, err = t.S.Cron(ctx, key, args.Cron, msg)
	default:
		return conch.ToolFail(fmt.Sprintf("unknown action %q: use at, after, cron, list or cancel", args.Action)), nil
	}
	if err != nil {
		return scheduleFailure("schedule", err)
	}
	return conch.ToolOK(fmt.Sprintf("Scheduled %s: %s. Cancel it with {\"action\":\"cancel\",\"id\":%q}.", e.ID, schedule.Describe(e), e.ID)), nil
}

// scheduleFailure turns a scheduler error into what the model reads, or a
// Go error when the store broke.
func scheduleFailure(op string, err error) (conch.ToolOutput, error) {
	switch conch.KindOf(err) {
	case conch.KindInvalid, conch.KindNotFound, conch.KindUnavailable:
		return conch.ToolFail(conch.UserMessage(err)), nil
	}
	return conch.ToolOutput{}, fmt.Errorf("%s: %w", op, err)
}

func listSchedules(ctx context.Context, s *schedule.Scheduler, key conch.ConversationKey) (conch.ToolOutput, error) {
	es, err := s.List(ctx, key)
	if err != nil {
		return conch.ToolOutput{}, fmt.Errorf("schedule list: %w", err)
	}
	if len(es) == 0 {
		return conch.ToolOK("No wakes or watches are set."), nil
	}
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%s  %s: %s\n", e.ID, schedule.Describe(e), clipText(e.Message, 120))
	}
	return conch.ToolOK(strings.TrimRight(b.String(), "\n")), nil
}

func cancelSchedule(ctx context.Context, s *schedule.Scheduler, key conch.ConversationKey, id string) (conch.ToolOutput, error) {
	if id == "" {
		return conch.ToolFail("give the `id` to cancel (see action list)"), nil
	}
	ok, err := s.Cancel(ctx, key, id)
	if err != nil {
		return conch.ToolOutput{}, fmt.Errorf("schedule cancel: %w", err)
	}
	if !ok {
		return conch.ToolFail(fmt.Sprintf("no wake or watch %q in this conversation (see action list)", id)), nil
	}
	return conch.ToolOK("Cancelled " + id + "."), nil
}

func clipText(s string, n int) string {
	r := []rune(strings.Join(strings.Fields(s), " "))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n]) + "…"
}
