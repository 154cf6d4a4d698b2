-- 0007: scheduled wakes and watches of each conversation (schedule/).
--
-- conversation is the conversation key as text ("channel:id"); it is not a
-- foreign key, because a schedule may be set before the conversation's first
-- stored message and is removed by the scheduler when the conversation is
-- reset or closed. next_at is when a wake fires next (NULL for watches);
-- spec is the cron expression or the watch's condition as JSON.
CREATE TABLE schedules (
	id           TEXT    PRIMARY KEY CHECK (id != ''),
	conversation TEXT    NOT NULL CHECK (conversation != ''),
	kind         TEXT    NOT NULL CHECK (kind IN ('at', 'cron', 'watch')),
	spec         TEXT    NOT NULL DEFAULT '',
	message      TEXT    NOT NULL DEFAULT '',
	next_at      INTEGER,
	created_at   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX schedules_conversation ON schedules (conversation, created_at);
CREATE INDEX schedules_created ON schedules (created_at);
