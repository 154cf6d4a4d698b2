package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// Parsing a statement costs more than running most of ours, so every
// statement the Store runs is prepared once at Open. The writer pool has one
// connection, so its statements stay prepared on it and tx.StmtContext
// reuses them; the reader pool prepares on each connection as it uses them.

// writeStmts run on the writer connection.
type writeStmts struct {
	findConversation, addConversation, addTurn, addUserMessage *sql.Stmt
	turnByID, turnByExternalID, startTurn, finishTurn          *sql.Stmt
	appendMessage, recordStep, resetConversation               *sql.Stmt
	stopUnfinished, remember, forget, setCursor, audit         *sql.Stmt
	deleteCursor                                               *sql.Stmt
	appendEvent, addSummary, setContextUse                     *sql.Stmt
	recordUsage                                                *sql.Stmt
	savepoint, rollbackTo, release                             *sql.Stmt
}

// readStmts run on the reader pool.
type readStmts struct {
	turnByID, unfinishedTurns, history, steps, conversations *sql.Stmt
	facts, cursor, auditSince                                *sql.Stmt
	eventsSince, lastEventSeq                                *sql.Stmt
	summaries, summaryOf, conversationTurns, auditAfter      *sql.Stmt
	historyHead, modelHistory, contextStatus                 *sql.Stmt
	turnMessages                                             *sql.Stmt
	usageSinceAll, usageSinceConversation, usageSincePerson  *sql.Stmt
	usageDaysAll, usageDaysPerson                            *sql.Stmt
	turnUsage, lastModel                                     *sql.Stmt
}

type stmtSpec struct {
	dst   **sql.Stmt
	query string
}

func (w *writeStmts) specs() []stmtSpec {
	return []stmtSpec{
		{&w.findConversation, sqlFindConversation},
		{&w.addConversation, sqlAddConversation},
		{&w.addTurn, sqlAddTurn},
		{&w.addUserMessage, sqlAddUserMessage},
		{&w.turnByID, sqlTurnByID},
		{&w.turnByExternalID, sqlTurnByExternalID},
		{&w.startTurn, sqlStartTurn},
		{&w.finishTurn, sqlFinishTurn},
		{&w.appendMessage, sqlAppendMessage},
		{&w.recordStep, sqlRecordStep},
		{&w.resetConversation, sqlResetConversation},
		{&w.stopUnfinished, sqlStopUnfinished},
		{&w.remember, sqlRemember},
		{&w.forget, sqlForget},
		{&w.setCursor, sqlSetCursor},
		{&w.deleteCursor, sqlDeleteCursor},
		{&w.audit, sqlAudit},
		{&w.appendEvent, sqlAppendEvent},
		{&w.addSummary, sqlAddSummary},
		{&w.setContextUse, sqlSetContextUse},
		{&w.recordUsage, sqlRecordUsage},
		{&w.savepoint, `SAVEPOINT member`},
		{&w.rollbackTo, `ROLLBACK TO member`},
		{&w.release, `RELEASE member`},
	}
}

func (r *readStmts) specs() []stmtSpec {
	return []stmtSpec{
		{&r.turnByID, sqlTurnByID},
		{&r.unfinishedTurns, sqlUnfinishedTurns},
		{&r.history, sqlHistory},
		{&r.steps, sqlSteps},
		{&r.conversations, sqlConversations},
		{&r.facts, sqlFacts},
		{&r.cursor, sqlCursor},
		{&r.auditSince, sqlAuditSince},
		{&r.eventsSince, sqlEventsSince},
		{&r.lastEventSeq, sqlLastEventSeq},
		{&r.summaries, sqlConversationSummaries},
		{&r.summaryOf, sqlConversationSummaryOf},
		{&r.conversationTurns, sqlConversationTurns},
		{&r.auditAfter, sqlAuditAfter},
		{&r.historyHead, sqlHistoryHead},
		{&r.modelHistory, sqlModelHistory},
		{&r.contextStatus, sqlContextStatus},
		{&r.turnMessages, sqlTurnMessages},
		{&r.usageSinceAll, sqlUsageSinceAll},
		{&r.usageSinceConversation, sqlUsageSinceConversation},
		{&r.usageSincePerson, sqlUsageSincePerson},
		{&r.usageDaysAll, sqlUsageDaysAll},
		{&r.usageDaysPerson, sqlUsageDaysPerson},
		{&r.turnUsage, sqlTurnUsage},
		{&r.lastModel, sqlLastModel},
	}
}

// prepare prepares specs on db and records them in d for Close.
func (d *DB) prepare(ctx context.Context, db *sql.DB, specs []stmtSpec) error {
	for _, s := range specs {
		st, err := db.PrepareContext(ctx, s.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", s.query, err)
		}
		*s.dst = st
		d.prepared = append(d.prepared, st)
	}
	return nil
}
