-- 0012: the tokens of conch's own MCP server (`conch mcp token`): each opens
-- one conversation's computer to an MCP client. The token is
-- "conch_mcp_<id>_<secret>"; only the SHA-256 (hex) of the whole token is
-- kept. Revoking deletes the row; expired rows are pruned by the janitor.
CREATE TABLE mcp_tokens (
	id           TEXT    PRIMARY KEY CHECK (id != ''),
	secret_hash  TEXT    NOT NULL CHECK (secret_hash != ''),
	channel      TEXT    NOT NULL CHECK (channel != ''),
	key_id       TEXT    NOT NULL CHECK (key_id != ''),
	label        TEXT    NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER,
	last_used_at INTEGER
) STRICT, WITHOUT ROWID;
CREATE INDEX mcp_tokens_expires ON mcp_tokens (expires_at) WHERE expires_at IS NOT NULL;
