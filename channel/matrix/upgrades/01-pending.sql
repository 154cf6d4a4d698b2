-- v0 -> v1: Matrix events waiting for their room key
CREATE TABLE conch_matrix_pending (
	event_id   TEXT PRIMARY KEY,
	room_id    TEXT NOT NULL,
	session_id TEXT NOT NULL,
	event      TEXT NOT NULL,
	added_at   BIGINT NOT NULL
);
CREATE INDEX conch_matrix_pending_session ON conch_matrix_pending (session_id);
