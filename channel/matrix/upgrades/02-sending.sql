-- v1 -> v2 (compatible with v1+): outbound message parts by transaction id, in progress or sent
CREATE TABLE conch_matrix_sending (
	txn_id       TEXT PRIMARY KEY,
	room_id      TEXT NOT NULL,
	started_at   BIGINT NOT NULL,
	attempted_at BIGINT NOT NULL,
	event_id     TEXT
);
