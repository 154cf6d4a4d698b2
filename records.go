package conch

import (
	"context"
	"time"
)

// Records the store keeps for the packages that use them (schedule,
// terminal): declared here, so that the store implements them without
// importing those packages.

// ScheduleKind is what a schedule entry waits for.
type ScheduleKind string

// Kinds of schedule entries.
const (
	// ScheduleAt fires once at Next (also "after a delay").
	ScheduleAt ScheduleKind = "at"
	// ScheduleCron fires at every time of its cron expression (Spec).
	ScheduleCron ScheduleKind = "cron"
	// ScheduleWatch fires once when its condition (Spec, a
	// schedule.WatchSpec in JSON) holds.
	ScheduleWatch ScheduleKind = "watch"
)

// ScheduleEntry is one scheduled wake or watch of a conversation.
type ScheduleEntry struct {
	ID  string
	Key ConversationKey
	// Kind says what the entry waits for; Spec is the cron expression
	// (ScheduleCron) or the watch's condition as JSON (ScheduleWatch).
	Kind ScheduleKind
	Spec string
	// Message is what the conversation is told when the entry fires.
	Message string
	// Next is when a wake fires next; zero for watches.
	Next      time.Time
	CreatedAt time.Time
}

// Origin is the inbound origin of the entry's messages.
func (e ScheduleEntry) Origin() Origin {
	if e.Kind == ScheduleWatch {
		return Origin{Kind: OriginWatch, Ref: e.ID}
	}
	return Origin{Kind: OriginSchedule, Ref: e.ID}
}

// ScheduleStore keeps the schedule entries.
type ScheduleStore interface {
	AddSchedule(ctx context.Context, e ScheduleEntry) error
	// Schedules lists the conversation's entries (every conversation's
	// when key is zero), oldest first.
	Schedules(ctx context.Context, key ConversationKey) ([]ScheduleEntry, error)
	// DeleteSchedule removes an entry; it reports whether there was one.
	DeleteSchedule(ctx context.Context, id string) (bool, error)
	// SetScheduleNext moves a wake's next time.
	SetScheduleNext(ctx context.Context, id string, next time.Time) error
}

// TerminalRecord is what conch remembers about one terminal so that a
// restarted conch finds it again and knows what the model has already
// seen.
type TerminalRecord struct {
	// TTY is the terminal number (0–19); terminal.CodeTTY for the coding
	// agent.
	TTY int
	// Session is the tmux session name.
	Session string
	// Command is what was started ("" for a shell).
	Command string
	// Shell is true for a shell TTY with conch's completion markers.
	Shell bool
	// Nonce is the terminal's marker secret.
	Nonce    string
	OpenedAt time.Time
	// Mark is the absolute line (history and screen counted from the
	// first line tmux still holds) where the last observation began;
	// Seen is what the lines from Mark on showed then.
	Mark int
	Seen []string
	// Observed is set when the last observation came after the last
	// input: nothing typed into the terminal waits to be seen. A restarted
	// conch then lets the model type at once if the screen is unchanged.
	Observed bool
}

// TerminalRegistry stores terminal records, per scope (a conversation).
type TerminalRegistry interface {
	SaveTerminal(ctx context.Context, scope string, r TerminalRecord) error
	LoadTerminals(ctx context.Context, scope string) ([]TerminalRecord, error)
	DeleteTerminal(ctx context.Context, scope string, tty int) error
}

// TurnMessage is a stored message of a turn with the time it was written
// (for transcripts, which show every turn as recorded).
type TurnMessage struct {
	Message
	At time.Time
}
