-- 0005: whether the model had observed a terminal after the last input when
-- its record was saved. A restarted conch lets the model type at once into
-- terminals that were observed and whose screen has not changed since;
-- rows from before this column count as not observed (the cautious answer).
ALTER TABLE terminals ADD COLUMN observed INTEGER NOT NULL DEFAULT 0;
