-- 0011: a table per concept for what the cursors table held besides channel
-- positions and settings, moving the existing rows.
--
-- web_conversations: the web chat's list, one row each (was the JSON array in
-- cursor 'web:conversations', read-modified-written in one process). seq
-- keeps the order of creation.
CREATE TABLE web_conversations (
	seq        INTEGER PRIMARY KEY,
	id         TEXT    NOT NULL UNIQUE CHECK (id != ''),
	title      TEXT    NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;

INSERT OR IGNORE INTO web_conversations (id, title, created_at)
SELECT json_extract(j.value, '$.id'),
       coalesce(json_extract(j.value, '$.title'), ''),
       coalesce(unixepoch(json_extract(j.value, '$.created')) * 1000, c.updated_at)
FROM cursors c, json_each(c.value) j
WHERE c.name = 'web:conversations' AND json_valid(c.value) AND json_type(c.value) = 'array'
  AND coalesce(json_extract(j.value, '$.id'), '') != ''
ORDER BY j.key;

-- markers: external ids already handled (scope 'command': the gateway's
-- handled commands, id '<channel>:<external id>'; was cursor
-- 'command:<channel>:<id>'). A marker expires after conch.MarkerTTL (30
-- days, the longest a redelivery or resume spans); the store's janitor
-- deletes expired rows.
CREATE TABLE markers (
	scope      TEXT    NOT NULL CHECK (scope != ''),
	id         TEXT    NOT NULL CHECK (id != ''),
	marked_at  INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (scope, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX markers_expires ON markers (expires_at);

INSERT OR IGNORE INTO markers (scope, id, marked_at, expires_at)
SELECT 'command', substr(name, 9), updated_at, updated_at + 2592000000
FROM cursors
WHERE substr(name, 1, 8) = 'command:' AND length(name) > 8 AND value != '';

-- sent_ids: ids of messages a channel sent, with their conversation (email:
-- a reply's Message-ID, lower case, without angle brackets; was cursor
-- 'email:sent:<id>'). Kept conch.SentTTL (one year): they stop a re-send
-- after a crash and thread a late reply to its conversation.
CREATE TABLE sent_ids (
	channel      TEXT    NOT NULL CHECK (channel != ''),
	id           TEXT    NOT NULL CHECK (id != ''),
	conversation TEXT    NOT NULL,
	sent_at      INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	PRIMARY KEY (channel, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX sent_ids_expires ON sent_ids (expires_at);

INSERT OR IGNORE INTO sent_ids (channel, id, conversation, sent_at, expires_at)
SELECT 'email', substr(name, 12), value, updated_at, updated_at + 31536000000
FROM cursors
WHERE substr(name, 1, 11) = 'email:sent:' AND length(name) > 11 AND value != '';

-- web_logins: the web chat's single-use login tokens, SHA-256 hex of the
-- token (was cursor 'web:login:<hash>' holding the expiry in unix ms, or
-- 'used <time>' once used). A token is deleted when used; expired ones are
-- pruned by the janitor. Used ones are not moved.
CREATE TABLE web_logins (
	token_hash TEXT    PRIMARY KEY CHECK (token_hash != ''),
	expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX web_logins_expires ON web_logins (expires_at);

INSERT OR IGNORE INTO web_logins (token_hash, expires_at)
SELECT substr(name, 11), CAST(value AS INTEGER)
FROM cursors
WHERE substr(name, 1, 10) = 'web:login:' AND length(name) > 10
  AND value != '' AND value NOT GLOB '*[^0-9]*';

DELETE FROM cursors
WHERE name = 'web:conversations'
   OR substr(name, 1, 8) = 'command:'
   OR substr(name, 1, 11) = 'email:sent:'
   OR substr(name, 1, 10) = 'web:login:';

-- A cursor storing "" is none (SetCursor now deletes the row): drop those
-- left behind (cleared pairing codes).
DELETE FROM cursors WHERE value = '';
