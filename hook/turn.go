package hook

import (
	"context"

	"conch"
)

// BeforeTurn runs the pre-turn hooks (gateway.Hooks).
func (r *Runner) BeforeTurn(ctx context.Context, t conch.Turn) conch.HookRan {
	return r.stage(ctx, PreTurn, Turn{Key: t.Key, Turn: t.ID, LastMessage: t.Inbound.Text, Log: turnLog(t, "")})
}

// AfterTurn runs the post-turn hooks (gateway.Hooks).
func (r *Runner) AfterTurn(ctx context.Context, t conch.Turn, answer string, normal bool) conch.HookRan {
	return r.stage(ctx, PostTurn, Turn{Key: t.Key, Turn: t.ID, LastMessage: answer, Normal: normal, Log: turnLog(t, answer)})
}

// PreStop runs the pre-stop hooks; their open issues are handed back to
// the model. It is agent.Options.PreStop.
func (r *Runner) PreStop(ctx context.Context, turn conch.TurnID, env conch.ToolEnv, answer string) conch.HookRan {
	return r.stage(ctx, PreStop, Turn{Key: env.Conversation, Turn: turn, LastMessage: answer, Log: "answer:\n" + answer + "\n"})
}

// turnLog is the account of a turn CONCH_TURN_LOG names.
func turnLog(t conch.Turn, answer string) string {
	s := "message (" + string(t.Inbound.Sender) + "):\n" + t.Inbound.Text + "\n"
	if answer != "" {
		s += "\nanswer:\n" + answer + "\n"
	}
	return s
}
