-- 0009: the web chat's sessions (channel/web), kept on the server so that log
-- out ends one and `conch web logout-all` all of them.
--
-- The cookie carries "<id>.<secret>"; the page sends a request token besides
-- it. Only SHA-256 hashes (hex) of the secret and the token are kept. Expired
-- rows are pruned (at each login and hourly).
CREATE TABLE web_sessions (
	id          TEXT    PRIMARY KEY CHECK (id != ''),
	secret_hash TEXT    NOT NULL CHECK (secret_hash != ''),
	token_hash  TEXT    NOT NULL CHECK (token_hash != ''),
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);
