// Package schedule keeps a conversation's scheduled wakes and watches and
// turns them into inbound messages of that conversation.
//
// Wakes fire at a time, after a delay or on a cron expression
// (github.com/robfig/cron/v3's standard parser: five fields or a descriptor
// such as @hourly or "@every 90m"). Watches fire once when a terminal's
// command exits, when a terminal prints a line matching a pattern, or when a
// workspace file changes. Both live in the store, survive restarts (a wake
// missed while conch was down fires once at the next start, saying so) and
// arrive through conch.Submitter with an Origin (OriginSchedule or
// OriginWatch, Ref = the entry's id), so the answer goes to the
// conversation's channel like any other.
package schedule

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"conch"
)

// Kind is what an entry waits for (the store's record type, in the root
// package).
type Kind = conch.ScheduleKind

// Kinds of entries.
const (
	// KindAt fires once at Next (also "after a delay").
	KindAt = conch.ScheduleAt
	// KindCron fires at every time of its cron expression (Spec).
	KindCron = conch.ScheduleCron
	// KindWatch fires once when its condition (Spec, a WatchSpec in JSON) holds.
	KindWatch = conch.ScheduleWatch
)

// Entry is one scheduled wake or watch of a conversation, as the store
// keeps it.
type Entry = conch.ScheduleEntry

// Describe is a one-line account of the entry for lists.
func Describe(e Entry) string {
	switch e.Kind {
	case KindAt:
		return fmt.Sprintf("once at %s", e.Next.UTC().Format(time.RFC3339))
	case KindCron:
		return fmt.Sprintf("cron %q, next %s", e.Spec, e.Next.UTC().Format(time.RFC3339))
	case KindWatch:
		if w, err := ParseWatch(e.Spec); err == nil {
			return w.Describe()
		}
	}
	return string(e.Kind) + " " + e.Spec
}

// WatchOn is the condition of a watch.
type WatchOn string

// Watch conditions.
const (
	// WatchExit: the command running in a terminal ends.
	WatchExit WatchOn = "exit"
	// WatchMatch: a terminal prints a line matching Pattern.
	WatchMatch WatchOn = "match"
	// WatchFile: a workspace file changes (created, written, removed).
	WatchFile WatchOn = "file"
)

// WatchSpec is a watch's condition, stored as JSON in Entry.Spec.
type WatchSpec struct {
	On       WatchOn `json:"on"`
	Terminal int     `json:"terminal,omitempty"`
	Pattern  string  `json:"pattern,omitempty"`
	Path     string  `json:"path,omitempty"`
	// Stamp is the file's state when the watch was set ("" = absent), so
	// a change while conch was not running is noticed at the next start.
	Stamp string `json:"stamp,omitempty"`
}

// ParseWatch decodes a stored WatchSpec.
func ParseWatch(s string) (WatchSpec, error) {
	var w WatchSpec
	if err := json.Unmarshal([]byte(s), &w); err != nil {
		return w, fmt.Errorf("watch spec: %w", err)
	}
	return w, nil
}

// Encode is the JSON form kept in Entry.Spec.
func (w WatchSpec) Encode() string {
	b, _ := json.Marshal(w)
	return string(b)
}

// Describe says what the watch waits for.
func (w WatchSpec) Describe() string {
	switch w.On {
	case WatchExit:
		return fmt.Sprintf("when the command in terminal %d exits", w.Terminal)
	case WatchMatch:
		return fmt.Sprintf("when terminal %d prints a line matching %q", w.Terminal, w.Pattern)
	case WatchFile:
		return fmt.Sprintf("when %s changes", w.Path)
	}
	return "watch " + string(w.On)
}

// cronParser reads five-field expressions and descriptors (@hourly, @every 1h).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a cron expression.
func ParseCron(spec string) (cron.Schedule, error) {
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, conch.Errorf(conch.KindInvalid, "cron expression %q: %v (use five fields \"minute hour day month weekday\", e.g. \"0 * * * *\", or @hourly, @daily, \"@every 2h\")", spec, err)
	}
	return s, nil
}

// Store keeps the entries. *sqlite.DB implements it.
type Store = conch.ScheduleStore

// newID returns a fresh entry id with a prefix ("s" wakes, "w" watches).
func newID(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}
