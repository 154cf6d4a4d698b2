-- 0008: notes conch writes into a turn (a pre-stop hook's open issues handed
-- back to the model). They are user-role messages for the model, but not the
-- person's message: the turn's own user message stays the one with note = 0
-- (the smallest id of its turn), and read models and turn lookups ignore notes.
ALTER TABLE messages ADD COLUMN note INTEGER NOT NULL DEFAULT 0 CHECK (note IN (0, 1));
