-- 0006: what the model sees of long conversations.
--
-- context_summaries: each row stands in for the conversation's history up to
-- and including message (through_turn, through_message) of its generation;
-- the model reads the newest one instead of those messages. The messages
-- themselves stay (History and transcripts read them). A summary is written
-- in one statement with the range it covers, so a crash before it leaves the
-- old view and the next turn simply compacts again.
CREATE TABLE context_summaries (
	id              INTEGER PRIMARY KEY,
	conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	generation      INTEGER NOT NULL,
	through_turn    INTEGER NOT NULL,
	through_message INTEGER NOT NULL,
	summary         TEXT    NOT NULL,
	messages        INTEGER NOT NULL DEFAULT 0, -- stored messages covered, earlier summaries' included
	created_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX context_summaries_conversation ON context_summaries (conversation_id, generation, id);

-- context_use: the size of each conversation's newest request plus its
-- answer, and the window it was measured against, for /status.
CREATE TABLE context_use (
	conversation_id INTEGER PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
	generation      INTEGER NOT NULL,
	tokens          INTEGER NOT NULL,
	context_window  INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL
) STRICT;
