-- 0010: every model call's tokens and price, for /usage, `conch usage`,
-- budgets and /metrics. A row is written after each answered call (a
-- compaction's summary call too); the person is the turn's channel and
-- sender. cost_usd is priced when the call is made (the price table of that
-- day, config overrides included), so a later price change leaves history as
-- it was billed. Rows outlive /reset (the money was spent).
CREATE TABLE model_usage (
	id              INTEGER PRIMARY KEY,
	conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	turn_id         INTEGER NOT NULL,
	channel         TEXT    NOT NULL,
	sender          TEXT    NOT NULL,
	model           TEXT    NOT NULL,
	purpose         TEXT    NOT NULL DEFAULT '',
	fallback        INTEGER NOT NULL DEFAULT 0 CHECK (fallback IN (0, 1)),
	input_tokens    INTEGER NOT NULL,
	cached_tokens   INTEGER NOT NULL,
	output_tokens   INTEGER NOT NULL,
	estimated       INTEGER NOT NULL DEFAULT 0 CHECK (estimated IN (0, 1)),
	cost_usd        REAL    NOT NULL,
	at              INTEGER NOT NULL
) STRICT;
CREATE INDEX model_usage_at ON model_usage (at);
CREATE INDEX model_usage_conversation ON model_usage (conversation_id, at);
CREATE INDEX model_usage_person ON model_usage (channel, sender, at);
CREATE INDEX model_usage_turn ON model_usage (turn_id);
