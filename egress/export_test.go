package egress

import "conch"

// BridgeOf is the conversation's current bridge (nil if none), for tests.
func (bs *Bridges) BridgeOf(key conch.ConversationKey) *Bridge {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return bs.m[key].b
}
