-- 0014: each UTC day's model usage of everybody and of each person, kept
-- by triggers as model_usage changes, so a daily budget's check reads one
-- row instead of adding up every call of the day: with 10,000 calls that sum
-- took 4.5 ms, for each limit before each model call, and grew with the
-- day's traffic (sqlite.BenchmarkBudgetCheck; 5 us from the days' rows). A
-- conversation's own calls stay summed from model_usage: one conversation's
-- day is small. scope 0 is everybody (channel and sender ''), scope 1 the
-- person channel/sender; day is the UTC day's start in unix milliseconds.
CREATE TABLE usage_days (
	scope         INTEGER NOT NULL CHECK (scope IN (0, 1)),
	channel       TEXT    NOT NULL,
	sender        TEXT    NOT NULL,
	day           INTEGER NOT NULL,
	calls         INTEGER NOT NULL,
	input_tokens  INTEGER NOT NULL,
	cached_tokens INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	estimated     INTEGER NOT NULL,
	cost_usd      REAL    NOT NULL,
	PRIMARY KEY (scope, channel, sender, day)
) STRICT, WITHOUT ROWID;

INSERT INTO usage_days (scope, channel, sender, day, calls, input_tokens, cached_tokens, output_tokens, estimated, cost_usd)
	SELECT 0, '', '', at - at % 86400000, count(*), sum(input_tokens), sum(cached_tokens), sum(output_tokens), sum(estimated), sum(cost_usd)
	FROM model_usage GROUP BY at - at % 86400000;
INSERT INTO usage_days (scope, channel, sender, day, calls, input_tokens, cached_tokens, output_tokens, estimated, cost_usd)
	SELECT 1, channel, sender, at - at % 86400000, count(*), sum(input_tokens), sum(cached_tokens), sum(output_tokens), sum(estimated), sum(cost_usd)
	FROM model_usage GROUP BY channel, sender, at - at % 86400000;

CREATE TRIGGER usage_days_add AFTER INSERT ON model_usage BEGIN
	INSERT INTO usage_days (scope, channel, sender, day, calls, input_tokens, cached_tokens, output_tokens, estimated, cost_usd)
		VALUES (0, '', '', NEW.at - NEW.at % 86400000, 1, NEW.input_tokens, NEW.cached_tokens, NEW.output_tokens, NEW.estimated, NEW.cost_usd),
		       (1, NEW.channel, NEW.sender, NEW.at - NEW.at % 86400000, 1, NEW.input_tokens, NEW.cached_tokens, NEW.output_tokens, NEW.estimated, NEW.cost_usd)
		ON CONFLICT DO UPDATE SET calls = calls + excluded.calls, input_tokens = input_tokens + excluded.input_tokens,
			cached_tokens = cached_tokens + excluded.cached_tokens, output_tokens = output_tokens + excluded.output_tokens,
			estimated = estimated + excluded.estimated, cost_usd = cost_usd + excluded.cost_usd;
END;

-- Rows go only with their conversation (ON DELETE CASCADE); its calls then
-- leave the days' sums too, as they leave model_usage.
CREATE TRIGGER usage_days_remove AFTER DELETE ON model_usage BEGIN
	UPDATE usage_days SET calls = calls - 1, input_tokens = input_tokens - OLD.input_tokens,
		cached_tokens = cached_tokens - OLD.cached_tokens, output_tokens = output_tokens - OLD.output_tokens,
		estimated = estimated - OLD.estimated, cost_usd = cost_usd - OLD.cost_usd
	WHERE scope = 0 AND channel = '' AND sender = '' AND day = OLD.at - OLD.at % 86400000;
	UPDATE usage_days SET calls = calls - 1, input_tokens = input_tokens - OLD.input_tokens,
		cached_tokens = cached_tokens - OLD.cached_tokens, output_tokens = output_tokens - OLD.output_tokens,
		estimated = estimated - OLD.estimated, cost_usd = cost_usd - OLD.cost_usd
	WHERE scope = 1 AND channel = OLD.channel AND sender = OLD.sender AND day = OLD.at - OLD.at % 86400000;
END;
