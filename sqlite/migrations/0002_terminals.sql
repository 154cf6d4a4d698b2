-- 0002: the terminals (tmux TTYs and the coding-agent session) of each
-- scope (a conversation key), so that a restarted conch finds them again and
-- knows what the model has already seen of each.
--
-- scope is the terminal Manager's scope (the conversation key as text); it is
-- not a foreign key, because terminals outlive a reset of the conversation
-- and are dropped when their sandbox is removed. seen is a JSON array of the
-- screen lines at the last observation; mark is the absolute line it began.
-- nonce is the terminal's marker secret (its completion markers carry it).
CREATE TABLE terminals (
	scope      TEXT    NOT NULL CHECK (scope != ''),
	tty        INTEGER NOT NULL,
	session    TEXT    NOT NULL,
	command    TEXT    NOT NULL DEFAULT '',
	shell      INTEGER NOT NULL DEFAULT 0,
	nonce      TEXT    NOT NULL DEFAULT '',
	opened_at  INTEGER NOT NULL,
	mark       INTEGER NOT NULL DEFAULT -1,
	seen       TEXT    NOT NULL DEFAULT '[]',
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (scope, tty)
) STRICT;
