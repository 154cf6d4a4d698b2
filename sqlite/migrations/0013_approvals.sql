-- 0013: approvals, questions a person answers before a tool call goes on
-- (a coding CLI's permission prompt, a command the tools.approve policy
-- names). A question is keyed by its turn's tool call, so the same call
-- asking again after a restart finds it, answered or still open; an open
-- question past its deadline is denied by the gateway when the call asks.
CREATE TABLE approvals (
	id           TEXT    PRIMARY KEY CHECK (id != ''),
	channel      TEXT    NOT NULL CHECK (channel != ''),
	conversation TEXT    NOT NULL CHECK (conversation != ''),
	turn         INTEGER NOT NULL,
	call_id      TEXT    NOT NULL,
	request      TEXT    NOT NULL CHECK (json_valid(request)),
	status       TEXT    NOT NULL CHECK (status IN ('open', 'decided')),
	choice       TEXT    NOT NULL DEFAULT '',
	reason       TEXT    NOT NULL DEFAULT '',
	decided_by   TEXT    NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	deadline     INTEGER NOT NULL,
	decided_at   INTEGER NOT NULL DEFAULT 0,
	-- used_at: when the waiting call took an allowing decision and went on
	-- to run; a resumed turn runs a call again only while this is 0.
	used_at      INTEGER NOT NULL DEFAULT 0,
	-- shown_at: when the question reached its channel; a question stored
	-- but not shown before a crash is shown when its call asks again.
	shown_at     INTEGER NOT NULL DEFAULT 0,
	UNIQUE (turn, call_id)
) STRICT;
CREATE INDEX approvals_open ON approvals (channel, conversation, created_at) WHERE status = 'open';

-- approval_grants: "allow for this conversation", per scope (a policy
-- pattern, "coder:<cli>"); a reset conversation loses them.
CREATE TABLE approval_grants (
	channel      TEXT    NOT NULL,
	conversation TEXT    NOT NULL,
	scope        TEXT    NOT NULL CHECK (scope != ''),
	granted_at   INTEGER NOT NULL,
	PRIMARY KEY (channel, conversation, scope)
) STRICT, WITHOUT ROWID;
