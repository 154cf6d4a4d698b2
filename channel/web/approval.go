package web

import (
	"context"
	"net/http"

	"conch"
)

// Approval questions in the web chat are rendered from the conversation's
// events (approval, approval_resolved) with three buttons; a click is
// POST /api/approvals {conversation, id, choice}, answered by the gateway
// (conch.ApprovalAnswerer) as the chat's owner, who sends its messages.

var _ conch.ApprovalChannel = (*Channel)(nil)

// SendApproval implements conch.ApprovalChannel: the page renders the
// question from its event.
func (c *Channel) SendApproval(_ context.Context, p conch.ApprovalPrompt) error {
	c.log.Debug("question (delivered through events)", "conversation", p.Key.String(), "approval", p.ID)
	return nil
}

// ApprovalDecided implements conch.ApprovalChannel: the page renders the
// outcome from its event.
func (c *Channel) ApprovalDecided(context.Context, conch.ApprovalPrompt, string) error { return nil }

// answerApproval is POST /api/approvals.
func (c *Channel) answerApproval(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Conversation string `json:"conversation"`
		ID           string `json:"id"`
		Choice       string `json:"choice"`
	}
	if err := readJSON(r, &req); err != nil {
		c.writeErr(w, "approval", err)
		return
	}
	choice, ok := conch.ParseApprovalChoice(req.Choice)
	if !ok || req.ID == "" {
		writeError(w, http.StatusBadRequest, "want {conversation, id, choice: once|conversation|deny}")
		return
	}
	cv, err := c.convs.Get(r.Context(), req.Conversation)
	if err != nil {
		c.writeErr(w, "approval", err)
		return
	}
	answerer, ok := c.handlerOrNil().(conch.ApprovalAnswerer)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "questions cannot be answered yet")
		return
	}
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: cv.ID}
	a, err := answerer.AnswerApproval(r.Context(), conch.ApprovalAnswer{Key: key, ID: req.ID, Choice: choice, Sender: c.opts.Owner})
	if err != nil {
		status := http.StatusInternalServerError
		switch conch.KindOf(err) {
		case conch.KindAuth:
			status = http.StatusForbidden
		case conch.KindNotFound:
			status = http.StatusNotFound
		case conch.KindInvalid:
			status = http.StatusConflict
		}
		c.log.Info("web answer to a question refused", "approval", req.ID, "err", err)
		writeError(w, status, conch.UserMessage(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "choice": a.Choice})
}
