-- 0004: where an inbound message came from (a person, a schedule, a watch),
-- the files that came with it, and the event log of every conversation.
--
-- attachments is a JSON array of {name, media_type, size, ref, path}: ref is
-- the spool reference of the durable copy, path where the turn puts it in
-- the workspace. '' when none.
ALTER TABLE turns ADD COLUMN origin_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE turns ADD COLUMN origin_ref  TEXT NOT NULL DEFAULT '';
ALTER TABLE turns ADD COLUMN attachments TEXT NOT NULL DEFAULT '';

-- events are the kept (not ephemeral) events of each conversation in Seq
-- order, so a subscriber resumes after the last one it saw across restarts.
-- conversation is the key as text ("channel:id"): events outlive a reset.
CREATE TABLE events (
	conversation TEXT    NOT NULL CHECK (conversation != ''),
	seq          INTEGER NOT NULL CHECK (seq > 0),
	turn_id      INTEGER NOT NULL DEFAULT 0,
	type         TEXT    NOT NULL,
	data         TEXT    NOT NULL,
	at           INTEGER NOT NULL,
	PRIMARY KEY (conversation, seq)
) STRICT, WITHOUT ROWID;
