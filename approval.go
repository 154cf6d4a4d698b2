package conch

import (
	"context"
	"errors"
	"strings"
	"time"
)

// An approval is a question a person answers before something runs: a
// coding CLI's permission prompt (coder.approvals = "person") or a command
// the operator's policy names (tools.approve). The gateway owns the flow
// (asks, waits, times out, audits); each channel renders the question with
// buttons when it can (ApprovalChannel) and otherwise as text answered by a
// reply ("yes", "always", "no").

// ApprovalChoice is a person's answer.
type ApprovalChoice string

// Approval choices.
const (
	// ApproveOnce allows this one call.
	ApproveOnce ApprovalChoice = "once"
	// ApproveConversation allows this call and every later one of the same
	// scope (ApprovalRequest.Scope) in this conversation.
	ApproveConversation ApprovalChoice = "conversation"
	// ApproveDeny refuses it. A timeout is a denial too.
	ApproveDeny ApprovalChoice = "deny"
)

// Allows reports whether the choice lets the call run.
func (c ApprovalChoice) Allows() bool { return c == ApproveOnce || c == ApproveConversation }

// Label is the choice's button text.
func (c ApprovalChoice) Label() string {
	switch c {
	case ApproveOnce:
		return "Allow once"
	case ApproveConversation:
		return "Allow for this conversation"
	case ApproveDeny:
		return "Deny"
	}
	return string(c)
}

// ApprovalChoices are the choices in the order buttons show them.
var ApprovalChoices = []ApprovalChoice{ApproveOnce, ApproveConversation, ApproveDeny}

// ParseApprovalChoice reads a choice from a button's value or a typed
// reply: "once"/"yes"/"y"/"allow", "conversation"/"always", "deny"/"no"/"n".
func ParseApprovalChoice(s string) (ApprovalChoice, bool) {
	switch strings.ToLower(strings.TrimSpace(strings.Trim(strings.TrimSpace(s), ".!"))) {
	case "once", "yes", "y", "allow", "allow once", "ok", "approve":
		return ApproveOnce, true
	case "conversation", "always", "allow always", "allow for this conversation", "yes always":
		return ApproveConversation, true
	case "deny", "no", "n", "refuse", "reject":
		return ApproveDeny, true
	}
	return "", false
}

// ApprovalStatus is where an approval stands.
type ApprovalStatus string

// Approval statuses.
const (
	ApprovalOpen    ApprovalStatus = "open"
	ApprovalDecided ApprovalStatus = "decided"
)

// Why an approval was decided without a person's choice.
const (
	ApprovalReasonPerson    = "person"     // a person chose
	ApprovalReasonTimeout   = "timeout"    // nobody answered in time: denied
	ApprovalReasonTurnEnded = "turn_ended" // the turn was stopped, reset or ran out of time: denied
	ApprovalReasonGrant     = "grant"      // allowed by an earlier "allow for this conversation"
)

// ApprovalRequest is what a tool asks a person.
type ApprovalRequest struct {
	// Kind is what asks: "command" (the bash tool's policy) or "coder" (a
	// coding CLI's permission prompt).
	Kind string `json:"kind"`
	// Title is one line: what would run.
	Title string `json:"title"`
	// Detail is more context (the rule that matched, the CLI's screen);
	// may be empty.
	Detail string `json:"detail,omitempty"`
	// Scope is what "allow for this conversation" allows from then on
	// (the policy's pattern, "coder:<cli>").
	Scope string `json:"scope"`
	// Resumable: the call that asks runs again, unchanged, when its turn
	// resumes after a restart, and finds the question (the bash tool's).
	// A question that is not resumable is denied when conch starts again.
	Resumable bool `json:"resumable,omitempty"`
}

// Approval is one question, as the store keeps it.
type Approval struct {
	// ID is short and unguessable: buttons carry it, replies may name it.
	ID  string
	Key ConversationKey
	// Turn and CallID are the tool call that waits: the same call asks
	// again after a restart and finds its question (answered or not).
	Turn    TurnID
	CallID  string
	Request ApprovalRequest
	Status  ApprovalStatus
	Choice  ApprovalChoice
	Reason  string
	By      UserID
	Created time.Time
	// Deadline is when an unanswered question is denied.
	Deadline time.Time
	Decided  time.Time
	// Used is when the waiting call took an allowing decision and went on
	// (zero until then): a resumed turn runs the call again only before.
	Used time.Time
	// Shown is when the question reached its channel (zero until then).
	Shown time.Time
}

// ApprovalDecision is what the tool that asked is told.
type ApprovalDecision struct {
	Choice ApprovalChoice
	// Reason is one of the ApprovalReason* values.
	Reason string
	By     UserID
}

// Approver asks the conversation's people. The gateway gives one to each
// turn through ToolEnv. Approve blocks until a person answered, the
// question timed out (a denial) or ctx ended (then it returns ctx's error
// and the question stays open when conch is shutting down, to be answered
// after the restart).
type Approver interface {
	Approve(ctx context.Context, callID string, req ApprovalRequest) (ApprovalDecision, error)
}

// ErrAwaitingAnswer is (wrapped in) the error of Approve when conch shuts
// down while the call waits: the question stays open, the call leaves no
// result, and the resumed turn runs it again, finding its question.
var ErrAwaitingAnswer = errors.New("the call waits for a person's answer; it goes on after the restart")

// ApprovalPrompt is a question as a channel renders it.
type ApprovalPrompt struct {
	Key       ConversationKey
	ID        string
	Text      string // Markdown: the question and what would run
	Choices   []ApprovalChoice
	InReplyTo string
	Thread    Thread
	// OutboundID is a stable id of the message (see Outbound.ID).
	OutboundID string
}

// ApprovalChannel can show a question with buttons; a click comes back to
// the gateway through its Handler's ApprovalAnswerer. Channels without it
// get the question as a notice answered by a reply.
type ApprovalChannel interface {
	Channel
	SendApproval(ctx context.Context, p ApprovalPrompt) error
	// ApprovalDecided updates the question once decided (removes the
	// buttons, says who chose what); best effort.
	ApprovalDecided(ctx context.Context, p ApprovalPrompt, outcome string) error
}

// ApprovalAnswer is a click (or a reaction) on a question's button.
type ApprovalAnswer struct {
	// Key is the conversation the click came from: it must be the
	// question's.
	Key    ConversationKey
	ID     string
	Choice ApprovalChoice
	// Sender and SenderAliases are who clicked, as for an Inbound.
	Sender        UserID
	SenderAliases []UserID
}

// ApprovalAnswerer takes answers to questions. The gateway's Handler
// implements it; channels with buttons find it by type assertion. An answer
// from someone not admitted to the conversation or from another
// conversation is refused with a KindAuth error, one for an unknown question
// with KindNotFound, one for a question already decided with KindInvalid;
// their messages (UserMessage) can be shown to whoever clicked.
type ApprovalAnswerer interface {
	AnswerApproval(ctx context.Context, a ApprovalAnswer) (Approval, error)
}

// ApprovalStore keeps approvals and the conversation-wide grants.
type ApprovalStore interface {
	// AddApproval stores a new open question; when the same turn's call
	// asked before it returns that one (and false).
	AddApproval(ctx context.Context, a Approval) (Approval, bool, error)
	Approval(ctx context.Context, id string) (Approval, error)
	// DecideApproval records the decision of an open question; decided
	// is false (and the stored decision returned) when it was decided
	// already.
	DecideApproval(ctx context.Context, id string, d ApprovalDecision, at time.Time) (Approval, bool, error)
	// UseApproval records that the waiting call took the decision and
	// went on (Approval.Used).
	UseApproval(ctx context.Context, id string, at time.Time) error
	// ApprovalShown records that the question reached its channel.
	ApprovalShown(ctx context.Context, id string, at time.Time) error
	// OpenApprovals lists the conversation's open questions, oldest first
	// (every conversation's when key is zero).
	OpenApprovals(ctx context.Context, key ConversationKey) ([]Approval, error)
	// TurnApprovals lists a turn's questions (open or not) by call id.
	TurnApprovals(ctx context.Context, turn TurnID) (map[string]Approval, error)
	// Grant remembers "allow for this conversation" for scope; Granted
	// reads it; a reset conversation loses its grants (ClearGrants).
	Grant(ctx context.Context, key ConversationKey, scope string, at time.Time) error
	Granted(ctx context.Context, key ConversationKey, scope string) (bool, error)
	ClearGrants(ctx context.Context, key ConversationKey) error
}

// ApprovalAsked is the event of a new question.
type ApprovalAsked struct {
	ID       string          `json:"id"`
	Request  ApprovalRequest `json:"request"`
	Deadline time.Time       `json:"deadline"`
}

// ApprovalResolved is the event of a question's decision.
type ApprovalResolved struct {
	ID     string         `json:"id"`
	Choice ApprovalChoice `json:"choice"`
	Reason string         `json:"reason"`
	By     UserID         `json:"by,omitempty"`
}

func (ApprovalAsked) Type() string    { return "approval" }
func (ApprovalResolved) Type() string { return "approval_resolved" }
