-- 0001: conversations with their turns and messages, agent steps, per-user
-- facts, channel cursors and the audit log.
--
-- Times are INTEGER unix milliseconds, UTC. JSON columns are TEXT.

-- A conversation is a (channel, key_id) pair. generation is bumped by a
-- reset: history rows keep the generation they were written in, so a reset
-- hides old history from the model but keeps it for audit.
CREATE TABLE conversations (
	id         INTEGER PRIMARY KEY,
	channel    TEXT    NOT NULL CHECK (channel != ''),
	key_id     TEXT    NOT NULL CHECK (key_id != ''),
	generation INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	reset_at   INTEGER,
	UNIQUE (channel, key_id)
) STRICT;

-- A turn is the handling of one inbound message. It keeps everything of the
-- conch.Inbound except the text (that is the turn's user message) so that an
-- unfinished turn can be resumed after a restart. channel is copied from the
-- conversation so redeliveries are caught by one unique index.
CREATE TABLE turns (
	id                INTEGER PRIMARY KEY,
	conversation_id   INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	generation        INTEGER NOT NULL,
	channel           TEXT    NOT NULL,
	external_id       TEXT    NOT NULL DEFAULT '',
	sender            TEXT    NOT NULL,
	sender_name       TEXT    NOT NULL DEFAULT '',
	thread_subject    TEXT    NOT NULL DEFAULT '',
	thread_references TEXT    NOT NULL DEFAULT '', -- JSON array of strings, '' when none
	received_at       INTEGER,
	status            TEXT    NOT NULL
		CHECK (status IN ('pending', 'running', 'done', 'stopped', 'abandoned')),
	attempts          INTEGER NOT NULL DEFAULT 0,
	stopped_reason    TEXT    NOT NULL DEFAULT '',
	created_at        INTEGER NOT NULL,
	started_at        INTEGER,
	finished_at       INTEGER
) STRICT;
CREATE UNIQUE INDEX turns_external_id ON turns (channel, external_id) WHERE external_id != '';
CREATE INDEX turns_unfinished ON turns (id) WHERE status IN ('pending', 'running');
CREATE INDEX turns_conversation ON turns (conversation_id, status);

-- messages is the model-visible history. The user message of a turn is
-- written with the turn, so it always has the smallest id of its turn.
CREATE TABLE messages (
	id              INTEGER PRIMARY KEY,
	conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	turn_id         INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
	generation      INTEGER NOT NULL,
	role            TEXT    NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
	text            TEXT    NOT NULL DEFAULT '',
	tool_calls      TEXT,  -- JSON array, NULL when none
	tool_result     TEXT,  -- JSON object, NULL when none
	created_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX messages_history ON messages (conversation_id, generation, turn_id, id);
CREATE INDEX messages_turn ON messages (turn_id, role);

CREATE TABLE agent_steps (
	id      INTEGER PRIMARY KEY,
	turn_id INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
	kind    TEXT    NOT NULL CHECK (kind != ''),
	detail  TEXT    NOT NULL DEFAULT '{}',
	at      INTEGER NOT NULL
) STRICT;
CREATE INDEX agent_steps_turn ON agent_steps (turn_id, id);

CREATE TABLE facts (
	user_channel TEXT    NOT NULL CHECK (user_channel != ''),
	user_id      TEXT    NOT NULL CHECK (user_id != ''),
	key          TEXT    NOT NULL CHECK (key != ''),
	value        TEXT    NOT NULL,
	updated_at   INTEGER NOT NULL,
	PRIMARY KEY (user_channel, user_id, key)
) STRICT, WITHOUT ROWID;

CREATE TABLE cursors (
	name       TEXT    PRIMARY KEY CHECK (name != ''),
	value      TEXT    NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- audit outlives conversations on purpose: no foreign key.
CREATE TABLE audit (
	id                   INTEGER PRIMARY KEY,
	at                   INTEGER NOT NULL,
	kind                 TEXT    NOT NULL CHECK (kind != ''),
	conversation_channel TEXT    NOT NULL DEFAULT '',
	conversation_id      TEXT    NOT NULL DEFAULT '',
	detail               TEXT    NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX audit_at ON audit (at);
CREATE INDEX audit_conversation ON audit (conversation_channel, conversation_id, at);
