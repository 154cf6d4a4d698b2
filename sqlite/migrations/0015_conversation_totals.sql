-- 0015: each conversation's turn count and its model calls' tokens and cost,
-- kept on its row by triggers, for the dashboard and the web chat's list of
-- conversations (polled every 3 and 10 s): they added them up from every
-- turn and call of every conversation at each poll, 0.3 s with 300
-- conversations of 300 turns, growing with the store.
ALTER TABLE conversations ADD COLUMN turn_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN usage_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN usage_cost_usd REAL NOT NULL DEFAULT 0;

UPDATE conversations SET
	turn_count = (SELECT count(*) FROM turns t WHERE t.conversation_id = conversations.id),
	usage_tokens = (SELECT coalesce(sum(u.input_tokens + u.output_tokens), 0) FROM model_usage u WHERE u.conversation_id = conversations.id),
	usage_cost_usd = (SELECT coalesce(sum(u.cost_usd), 0) FROM model_usage u WHERE u.conversation_id = conversations.id);

CREATE TRIGGER conversation_turn_added AFTER INSERT ON turns BEGIN
	UPDATE conversations SET turn_count = turn_count + 1 WHERE id = NEW.conversation_id;
END;
CREATE TRIGGER conversation_turn_removed AFTER DELETE ON turns BEGIN
	UPDATE conversations SET turn_count = turn_count - 1 WHERE id = OLD.conversation_id;
END;
CREATE TRIGGER conversation_usage_added AFTER INSERT ON model_usage BEGIN
	UPDATE conversations SET usage_tokens = usage_tokens + NEW.input_tokens + NEW.output_tokens,
		usage_cost_usd = usage_cost_usd + NEW.cost_usd
	WHERE id = NEW.conversation_id;
END;
CREATE TRIGGER conversation_usage_removed AFTER DELETE ON model_usage BEGIN
	UPDATE conversations SET usage_tokens = usage_tokens - OLD.input_tokens - OLD.output_tokens,
		usage_cost_usd = usage_cost_usd - OLD.cost_usd
	WHERE id = OLD.conversation_id;
END;
