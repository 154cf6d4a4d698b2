-- 0003: indexes for the read models (conch.ReadModel): a conversation's
-- newest message and its turns newest first, each found by an index seek
-- instead of a walk over the conversation's whole history.
CREATE INDEX messages_latest ON messages (conversation_id, id);
CREATE INDEX turns_latest ON turns (conversation_id, id);
