package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"conch"
)

// Reasons the store itself writes into turns.stopped_reason.
const (
	// ReasonReset marks turns cancelled by ResetConversation.
	ReasonReset = "reset"
)

const (
	sqlFindConversation = `SELECT id, generation FROM conversations WHERE channel = ? AND key_id = ?`
	sqlAddConversation  = `INSERT INTO conversations (channel, key_id, created_at) VALUES (?, ?, ?) RETURNING id, generation`
	sqlConversations    = `SELECT channel, key_id FROM conversations ORDER BY channel, key_id`

	// sqlAddTurn adds a turn pending (status 'pending', attempts 0,
	// started_at NULL) or already started ('running', 1, its time).
	sqlAddTurn = `INSERT INTO turns (conversation_id, generation, channel, external_id, sender, sender_name,
		thread_subject, thread_references, received_at, status, attempts, started_at, created_at, origin_kind, origin_ref, attachments)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`
	sqlAddUserMessage = `INSERT INTO messages (conversation_id, turn_id, generation, role, text, created_at)
		VALUES (?, ?, ?, 'user', ?, ?)`

	// sqlSelectTurn reads a whole conch.Turn; the inbound text is the turn's
	// user message. Callers append a WHERE clause. CROSS JOIN makes SQLite
	// start from turns, so the WHERE on turns drives the query.
	sqlSelectTurn = `SELECT t.id, c.channel, c.key_id, t.sender, t.sender_name, m.text, t.external_id,
		t.thread_subject, t.thread_references, t.received_at, t.status, t.attempts, t.stopped_reason, t.created_at,
		t.origin_kind, t.origin_ref, t.attachments
		FROM turns t
		CROSS JOIN conversations c ON c.id = t.conversation_id
		CROSS JOIN messages m ON m.turn_id = t.id AND m.role = 'user' AND m.note = 0`
	sqlTurnByID         = sqlSelectTurn + ` WHERE t.id = ?`
	sqlTurnByExternalID = sqlSelectTurn + ` WHERE t.channel = ? AND t.external_id = ? AND t.external_id != ''`
	sqlUnfinishedTurns  = sqlSelectTurn + ` WHERE t.status IN ('pending', 'running') ORDER BY t.id`

	// sqlStartTurn returns the started turn as sqlSelectTurn reads it (and
	// its conversation's id): one statement, no read after it. Nothing it
	// returns can fail to scan (a NULL would fail its whole write group).
	sqlStartTurn = `UPDATE turns SET status = 'running', attempts = attempts + 1, started_at = ?
		WHERE id = ? AND status IN ('pending', 'running')
		RETURNING id,
			coalesce((SELECT channel FROM conversations c WHERE c.id = conversation_id), ''),
			coalesce((SELECT key_id FROM conversations c WHERE c.id = conversation_id), ''),
			sender, sender_name,
			coalesce((SELECT text FROM messages m WHERE m.turn_id = turns.id AND m.role = 'user' AND m.note = 0), ''),
			external_id, thread_subject, thread_references, received_at, status, attempts, stopped_reason, created_at,
			origin_kind, origin_ref, attachments, conversation_id`
	sqlFinishTurn = `UPDATE turns SET status = ?, stopped_reason = ?, finished_at = ? WHERE id = ?
		RETURNING conversation_id`

	// sqlAppendMessage copies conversation and generation from the turn, so
	// a message of a turn from before a reset stays hidden with its turn.
	sqlAppendMessage = `INSERT INTO messages (conversation_id, turn_id, generation, role, text, tool_calls, tool_result, note, created_at)
		SELECT conversation_id, id, generation, ?, ?, ?, ?, ?, ? FROM turns WHERE id = ? RETURNING conversation_id`

	// sqlHistory: the current generation only, turn by turn (the user message
	// has the smallest id of its turn), and not the messages of turns that
	// have not started: they are queued, not yet part of the conversation.
	sqlHistory = `SELECT m.role, m.text, m.tool_calls, m.tool_result,
		CASE WHEN m.role = 'user' AND m.note = 0 THEN t.attachments ELSE '' END, m.note
		FROM conversations c
		JOIN messages m ON m.conversation_id = c.id AND m.generation = c.generation
		JOIN turns t ON t.id = m.turn_id
		WHERE c.channel = ? AND c.key_id = ? AND t.status != 'pending'
		ORDER BY m.turn_id, m.id`

	sqlRecordStep = `INSERT INTO agent_steps (turn_id, kind, detail, at) VALUES (?, ?, ?, ?)`
	sqlSteps      = `SELECT turn_id, kind, detail, at FROM agent_steps WHERE turn_id = ? ORDER BY id`

	sqlResetConversation = `UPDATE conversations SET generation = generation + 1, reset_at = ?
		WHERE channel = ? AND key_id = ? RETURNING id`
	sqlStopUnfinished = `UPDATE turns SET status = 'stopped', stopped_reason = ?, finished_at = ?
		WHERE conversation_id = ? AND status IN ('pending', 'running')`
)

// StartTurn marks a pending or running turn running and counts an attempt.
// A finished turn (done, stopped, abandoned) is not started again: the error
// is of kind conch.KindInvalid and the Turn returned with it shows its state.
//
// One statement that returns the turn (write1: no savepoint in its group).
// The row is decoded after the write, so a turn that does not decode fails
// alone, never its group.
func (d *DB) StartTurn(ctx context.Context, id conch.TurnID) (conch.Turn, error) {
	now := millis(d.now())
	var row turnRow
	var conv int64
	err := d.write1(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return row.scan(tx.StmtContext(ctx, d.ws.startTurn).QueryRowContext(ctx, now, id), &conv)
	})
	if err == nil {
		d.history.written(conv, id) // its messages are part of the view now
		t, err := row.turn()
		if err != nil {
			return conch.Turn{}, fmt.Errorf("start turn %d: %w", id, err)
		}
		return t, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return conch.Turn{}, fmt.Errorf("start turn %d: %w", id, err)
	}
	// Not started: finished, or not there.
	t, err := scanTurn(d.rs.turnByID.QueryRowContext(ctx, id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return conch.Turn{}, fmt.Errorf("start turn %d: %w", id, conch.Errorf(conch.KindNotFound, "turn %d does not exist", id))
	case err != nil:
		return conch.Turn{}, fmt.Errorf("start turn %d: %w", id, err)
	}
	what := string(t.Status)
	if t.StoppedReason != "" {
		what += " (" + t.StoppedReason + ")"
	}
	return t, fmt.Errorf("start turn %d: %w", id, conch.Errorf(conch.KindInvalid, "turn %d is already %s", id, what))
}

// FinishTurn records the end of a turn: status is done, stopped or abandoned.
func (d *DB) FinishTurn(ctx context.Context, id conch.TurnID, status conch.TurnStatus, reason string) error {
	switch status {
	case conch.TurnDone, conch.TurnStopped, conch.TurnAbandoned:
	default:
		return fmt.Errorf("finish turn %d: %w", id, conch.Errorf(conch.KindInvalid, "status %q does not end a turn (want done, stopped or abandoned)", status))
	}
	now := millis(d.now())
	var conv int64
	err := d.write1(ctx, func(ctx context.Context, tx *sql.Tx) error {
		err := tx.StmtContext(ctx, d.ws.finishTurn).QueryRowContext(ctx, status, reason, now, id).Scan(&conv)
		if errors.Is(err, sql.ErrNoRows) {
			return conch.Errorf(conch.KindNotFound, "turn %d does not exist", id)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("finish turn %d: %w", id, err)
	}
	d.history.written(conv, id)
	return nil
}

// UnfinishedTurns lists pending and running turns, oldest first, with their
// whole Inbound, so they can be resumed after a restart.
func (d *DB) UnfinishedTurns(ctx context.Context) ([]conch.Turn, error) {
	rows, err := d.rs.unfinishedTurns.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("unfinished turns: %w", err)
	}
	defer rows.Close()
	var ts []conch.Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, fmt.Errorf("unfinished turns: %w", err)
		}
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("unfinished turns: %w", err)
	}
	return ts, nil
}

// Turn returns one turn.
func (d *DB) Turn(ctx context.Context, id conch.TurnID) (conch.Turn, error) {
	t, err := scanTurn(d.rs.turnByID.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = conch.Errorf(conch.KindNotFound, "turn %d does not exist", id)
	}
	if err != nil {
		return conch.Turn{}, fmt.Errorf("turn %d: %w", id, err)
	}
	return t, nil
}

// AppendMessage adds an assistant or tool message produced by a turn.
// An assistant message may carry ToolCalls; a tool message must carry a
// ToolResult. Tool call arguments are stored byte for byte, valid JSON or not
// (a model can produce broken arguments; the agent reports them back).
func (d *DB) AppendMessage(ctx context.Context, id conch.TurnID, m conch.Message) error {
	calls, result, err := encodeMessage(m)
	if err != nil {
		return fmt.Errorf("append message to turn %d: %w", id, err)
	}
	now := millis(d.now())
	var conv int64
	err = d.write1(ctx, func(ctx context.Context, tx *sql.Tx) error {
		err := tx.StmtContext(ctx, d.ws.appendMessage).QueryRowContext(ctx, m.Role, m.Text, calls, result, m.Note, now, id).Scan(&conv)
		if errors.Is(err, sql.ErrNoRows) {
			return conch.Errorf(conch.KindNotFound, "turn %d does not exist", id)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("append message to turn %d: %w", id, err)
	}
	d.history.written(conv, id)
	return nil
}

// History returns the conversation's messages since its last reset, turn by
// turn, the user message first within its turn. Messages of turns that have
// not started yet (pending) are left out: they are queued behind the turn
// that asks. An unknown conversation has no history.
func (d *DB) History(ctx context.Context, key conch.ConversationKey) ([]conch.Message, error) {
	if err := validKey(key); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	rows, err := d.rs.history.QueryContext(ctx, key.Channel, key.ID)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", key, err)
	}
	defer rows.Close()
	var ms []conch.Message
	for rows.Next() {
		var m conch.Message
		var calls, result sql.NullString
		var atts string
		if err := rows.Scan(&m.Role, &m.Text, &calls, &result, &atts, &m.Note); err != nil {
			return nil, fmt.Errorf("history of %s: %w", key, err)
		}
		if atts != "" {
			as, err := decodeAttachments(atts)
			if err != nil {
				return nil, fmt.Errorf("history of %s: %w", key, err)
			}
			m.Text = joinText(m.Text, conch.DescribeAttachments(as))
			m.Images = attachmentImages(as)
		}
		if err := decodeMessage(&m, calls, result); err != nil {
			return nil, fmt.Errorf("history of %s: %w", key, err)
		}
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history of %s: %w", key, err)
	}
	return ms, nil
}

// RecordStep appends an agent step. Detail must be a JSON object (empty
// means {}); a zero At is the current time.
func (d *DB) RecordStep(ctx context.Context, s conch.Step) error {
	args, err := d.stepArgs(s)
	if err != nil {
		return err
	}
	if err := d.write1(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, d.ws.recordStep).ExecContext(ctx, args...)
		return err
	}); err != nil {
		if isForeignKeyError(err) {
			err = conch.Errorf(conch.KindNotFound, "turn %d does not exist", s.Turn)
		}
		return fmt.Errorf("record %s step: %w", s.Kind, err)
	}
	return nil
}

// stepArgs are the recordStep statement's arguments for s.
func (d *DB) stepArgs(s conch.Step) ([]any, error) {
	if s.Kind == "" {
		return nil, fmt.Errorf("record step: %w", conch.Errorf(conch.KindInvalid, "step of turn %d has no kind", s.Turn))
	}
	detail, err := jsonObject("step detail", s.Detail)
	if err != nil {
		return nil, fmt.Errorf("record %s step: %w", s.Kind, err)
	}
	if s.At.IsZero() {
		s.At = d.now()
	}
	return []any{s.Turn, s.Kind, detail, millis(s.At)}, nil
}

// Steps returns the recorded steps of a turn in order.
func (d *DB) Steps(ctx context.Context, id conch.TurnID) ([]conch.Step, error) {
	rows, err := d.rs.steps.QueryContext(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("steps of turn %d: %w", id, err)
	}
	defer rows.Close()
	var ss []conch.Step
	for rows.Next() {
		var s conch.Step
		var detail string
		var at int64
		if err := rows.Scan(&s.Turn, &s.Kind, &detail, &at); err != nil {
			return nil, fmt.Errorf("steps of turn %d: %w", id, err)
		}
		s.Detail, s.At = json.RawMessage(detail), fromMillis(at)
		ss = append(ss, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("steps of turn %d: %w", id, err)
	}
	return ss, nil
}

// ResetConversation hides the conversation's history from History (it stays
// in the database for audit) and stops its pending and running turns with
// reason "reset". Resetting an unknown conversation does nothing.
func (d *DB) ResetConversation(ctx context.Context, key conch.ConversationKey) error {
	if err := validKey(key); err != nil {
		return fmt.Errorf("reset conversation: %w", err)
	}
	now := millis(d.now())
	var reset int64
	err := d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var convID int64
		err := tx.StmtContext(ctx, d.ws.resetConversation).QueryRowContext(ctx, now, key.Channel, key.ID).Scan(&convID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = tx.StmtContext(ctx, d.ws.stopUnfinished).ExecContext(ctx, ReasonReset, now, convID)
		reset = convID
		return err
	})
	if err != nil {
		return fmt.Errorf("reset conversation %s: %w", key, err)
	}
	if reset != 0 {
		d.history.written(reset, 0)
	}
	return nil
}

// Conversations lists the known conversation keys, sorted.
func (d *DB) Conversations(ctx context.Context) ([]conch.ConversationKey, error) {
	rows, err := d.rs.conversations.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("conversations: %w", err)
	}
	defer rows.Close()
	var ks []conch.ConversationKey
	for rows.Next() {
		var k conch.ConversationKey
		if err := rows.Scan(&k.Channel, &k.ID); err != nil {
			return nil, fmt.Errorf("conversations: %w", err)
		}
		ks = append(ks, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("conversations: %w", err)
	}
	return ks, nil
}

type scanner interface{ Scan(dest ...any) error }

// scanTurn reads a row of sqlSelectTurn.
func scanTurn(row scanner) (conch.Turn, error) {
	var r turnRow
	if err := r.scan(row); err != nil {
		return conch.Turn{}, err
	}
	return r.turn()
}

// turnRow is a row of sqlSelectTurn as stored, before its JSON columns are
// decoded.
type turnRow struct {
	t          conch.Turn
	refs, atts string
	received   sql.NullInt64
	created    int64
}

// scan reads the row's columns, then extra ones after them.
func (r *turnRow) scan(row scanner, extra ...any) error {
	in := &r.t.Inbound
	return row.Scan(append([]any{&r.t.ID, &in.Key.Channel, &in.Key.ID, &in.Sender, &in.SenderName, &in.Text, &in.ExternalID,
		&in.Thread.Subject, &r.refs, &r.received, &r.t.Status, &r.t.Attempts, &r.t.StoppedReason, &r.created,
		&in.Origin.Kind, &in.Origin.Ref, &r.atts}, extra...)...)
}

// turn decodes the row.
func (r *turnRow) turn() (conch.Turn, error) {
	t := r.t
	in := &t.Inbound
	if r.atts != "" {
		as, err := decodeAttachments(r.atts)
		if err != nil {
			return conch.Turn{}, fmt.Errorf("turn %d: %w", t.ID, err)
		}
		in.Attachments = as
	}
	if r.refs != "" {
		if err := json.Unmarshal([]byte(r.refs), &in.Thread.References); err != nil {
			return conch.Turn{}, fmt.Errorf("turn %d: thread references: %w", t.ID, err)
		}
	}
	t.Key = in.Key
	in.ReceivedAt = fromNullMillis(r.received)
	t.CreatedAt = fromMillis(r.created)
	return t, nil
}

// The stored forms of tool calls and results: explicit JSON names, so that
// renaming a Go field never breaks an existing database.
type storedToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is kept as a string: the model's bytes, valid JSON or not.
	Arguments string `json:"arguments,omitempty"`
}

type storedToolResult struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
	// Files are the files the tool queued for the turn's answer (send_file).
	Files []storedAttachment `json:"files,omitempty"`
	// Images by reference (the agent kept their bytes elsewhere); a
	// picture without a reference is not stored.
	Images []storedImage `json:"images,omitempty"`
}

// encodeMessage checks an appended message and renders its JSON columns.
func encodeMessage(m conch.Message) (calls, result sql.NullString, err error) {
	switch m.Role {
	case conch.RoleAssistant:
		if m.ToolResult != nil {
			return calls, result, conch.Errorf(conch.KindInvalid, "an assistant message cannot carry a tool result")
		}
	case conch.RoleTool:
		if m.ToolResult == nil {
			return calls, result, conch.Errorf(conch.KindInvalid, "a tool message needs a tool result")
		}
		if len(m.ToolCalls) > 0 {
			return calls, result, conch.Errorf(conch.KindInvalid, "a tool message cannot carry tool calls")
		}
	case conch.RoleUser:
		// The person's message is stored by AddInbound with its turn; a turn
		// may add only conch's own notes in the user's role.
		if !m.Note {
			return calls, result, conch.Errorf(conch.KindInvalid, "user messages are stored by AddInbound, not appended (only notes are)")
		}
		if len(m.ToolCalls) > 0 || m.ToolResult != nil {
			return calls, result, conch.Errorf(conch.KindInvalid, "a note carries text only")
		}
	default:
		return calls, result, conch.Errorf(conch.KindInvalid, "message role %q is not assistant or tool", m.Role)
	}
	if len(m.ToolCalls) > 0 {
		sc := make([]storedToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			if c.Name == "" {
				return calls, result, conch.Errorf(conch.KindInvalid, "tool call %d (id %q) has no name", i, c.ID)
			}
			sc[i] = storedToolCall{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)}
		}
		b, err := json.Marshal(sc)
		if err != nil {
			return calls, result, err
		}
		calls = sql.NullString{String: string(b), Valid: true}
	}
	if r := m.ToolResult; r != nil {
		sr := storedToolResult{CallID: r.CallID, Name: r.Name, Content: r.Content, IsError: r.IsError, Images: storeImages(r.Images)}
		for _, a := range r.Attachments {
			sr.Files = append(sr.Files, storedAttachment{Name: a.Name, MediaType: a.MediaType, Size: a.Size, Ref: a.Ref, Path: a.Path})
		}
		b, err := json.Marshal(sr)
		if err != nil {
			return calls, result, err
		}
		result = sql.NullString{String: string(b), Valid: true}
	}
	return calls, result, nil
}

func decodeMessage(m *conch.Message, calls, result sql.NullString) error {
	if calls.Valid {
		var sc []storedToolCall
		if err := json.Unmarshal([]byte(calls.String), &sc); err != nil {
			return fmt.Errorf("tool calls: %w", err)
		}
		m.ToolCalls = make([]conch.ToolCall, len(sc))
		for i, c := range sc {
			m.ToolCalls[i] = conch.ToolCall{ID: c.ID, Name: c.Name}
			if c.Arguments != "" {
				m.ToolCalls[i].Arguments = json.RawMessage(c.Arguments)
			}
		}
	}
	if result.Valid {
		var sr storedToolResult
		if err := json.Unmarshal([]byte(result.String), &sr); err != nil {
			return fmt.Errorf("tool result: %w", err)
		}
		m.ToolResult = &conch.ToolResult{CallID: sr.CallID, Name: sr.Name, Content: sr.Content, IsError: sr.IsError, Images: loadImages(sr.Images)}
		for _, a := range sr.Files {
			m.ToolResult.Attachments = append(m.ToolResult.Attachments, conch.Attachment{Name: a.Name, MediaType: a.MediaType, Size: a.Size, Ref: a.Ref, Path: a.Path})
		}
	}
	return nil
}

// storedAttachment is the stored form of a conch.Attachment (explicit JSON
// names, so renaming a Go field never breaks a database).
type storedAttachment struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type,omitempty"`
	Size      int64  `json:"size"`
	Ref       string `json:"ref,omitempty"`
	Path      string `json:"path,omitempty"`
	// What was prepared for the model (the picture by reference only).
	Image      *storedImage `json:"image,omitempty"`
	Transcript string       `json:"transcript,omitempty"`
	MediaNote  string       `json:"media_note,omitempty"`
	Prepared   bool         `json:"prepared,omitempty"`
}

// storedImage is a picture kept by reference: never its bytes.
type storedImage struct {
	MediaType string `json:"media_type"`
	Name      string `json:"name,omitempty"`
	Ref       string `json:"ref"`
}

func storeImages(is []conch.Image) []storedImage {
	var out []storedImage
	for _, im := range is {
		if im.Ref != "" {
			out = append(out, storedImage{MediaType: im.MediaType, Name: im.Name, Ref: im.Ref})
		}
	}
	return out
}

func loadImages(is []storedImage) []conch.Image {
	var out []conch.Image
	for _, im := range is {
		out = append(out, conch.Image{MediaType: im.MediaType, Name: im.Name, Ref: im.Ref})
	}
	return out
}

// attachmentImages returns the prepared pictures of a message's files.
func attachmentImages(as []conch.Attachment) []conch.Image {
	var out []conch.Image
	for _, a := range as {
		if a.Image != nil && a.Image.Ref != "" {
			out = append(out, conch.Image{MediaType: a.Image.MediaType, Name: a.Image.Name, Ref: a.Image.Ref})
		}
	}
	return out
}

// SetAttachments implements conch.AttachmentUpdater: the turn's stored
// files, with what was prepared of them for the model.
func (d *DB) SetAttachments(ctx context.Context, turn conch.TurnID, as []conch.Attachment) error {
	atts, err := encodeAttachments(as)
	if err != nil {
		return fmt.Errorf("set attachments of turn %d: %w", turn, err)
	}
	var conv int64
	err = d.write1(ctx, func(ctx context.Context, tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `UPDATE turns SET attachments = ? WHERE id = ? RETURNING conversation_id`, atts, turn).Scan(&conv)
		if errors.Is(err, sql.ErrNoRows) {
			return conch.Errorf(conch.KindNotFound, "turn %d does not exist", turn)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("set attachments of turn %d: %w", turn, err)
	}
	d.history.written(conv, turn) // the text of its user message
	return nil
}

func encodeAttachments(as []conch.Attachment) (string, error) {
	if len(as) == 0 {
		return "", nil
	}
	st := make([]storedAttachment, len(as))
	for i, a := range as {
		st[i] = storedAttachment{Name: a.Name, MediaType: a.MediaType, Size: a.Size, Ref: a.Ref, Path: a.Path,
			Transcript: a.Transcript, MediaNote: a.MediaNote, Prepared: a.Prepared}
		if a.Image != nil && a.Image.Ref != "" {
			st[i].Image = &storedImage{MediaType: a.Image.MediaType, Name: a.Image.Name, Ref: a.Image.Ref}
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("encode attachments: %w", err)
	}
	return string(b), nil
}

func decodeAttachments(s string) ([]conch.Attachment, error) {
	var st []storedAttachment
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return nil, fmt.Errorf("decode attachments: %w", err)
	}
	as := make([]conch.Attachment, len(st))
	for i, a := range st {
		as[i] = conch.Attachment{Name: a.Name, MediaType: a.MediaType, Size: a.Size, Ref: a.Ref, Path: a.Path,
			Transcript: a.Transcript, MediaNote: a.MediaNote, Prepared: a.Prepared}
		if im := a.Image; im != nil {
			as[i].Image = &conch.Image{MediaType: im.MediaType, Name: im.Name, Ref: im.Ref}
		}
	}
	return as, nil
}

// joinText appends note to text with a blank line between.
func joinText(text, note string) string {
	switch {
	case note == "":
		return text
	case text == "":
		return note
	}
	return text + "\n\n" + note
}
