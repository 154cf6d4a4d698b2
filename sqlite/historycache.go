package sqlite

import (
	"container/list"
	"sync"

	"conch"
)

// The model's view of a conversation is read at the start of every turn
// (ModelHistory). Read whole, turn N costs O(N): the messages since the
// last summary, decoded from JSON, every time. historyCache keeps each
// conversation's view and reads only what may have changed since:
//
//   - An entry belongs to one conversation id, generation and summary id; a
//     reset (new generation) or a compaction (new summary) makes it miss, and
//     the view is read whole again.
//   - An entry holds the messages of the turns through `through`; of those,
//     the turns before `stable` had ended when they were read (done, stopped
//     or abandoned), so their messages no longer change. The next read takes
//     the cached messages before `stable` and reads from turn `stable` on:
//     the running turn's messages and the turns after it, a few rows.
//   - Every write to a turn (a message appended, its status changed, its
//     files updated) is told to the cache (written): a turn before `stable`
//     drops the entry, and a read of the conversation that overlapped the
//     write keeps nothing of what it read. Writes come from this process only: the
//     store is conch up's alone (the data-dir lock), operator commands do
//     not write messages.
//
// What a caller gets is its own copy. The cache is bounded by entries and
// by the bytes of text it holds, least recently used first out.
type historyCache struct {
	mu       sync.Mutex
	entries  map[int64]*list.Element // by conversation id
	lru      list.List               // of *historyEntry, most recent first
	bytes    int
	maxBytes int
	maxConvs int
	// reading holds the conversations with a read in flight; a write to
	// one of them marks it dirty, and the reads then store nothing.
	reading map[int64]*historyRead
	// hits and misses count what went through, for tests.
	hits, misses int
}

type historyRead struct {
	n     int
	dirty bool
}

type historyEntry struct {
	conv, gen, summary int64
	through, stable    int64
	msgs               []conch.Message
	pos                []conch.HistoryPos
	// cum[i] is the bytes of msgs[:i+1] (messageBytes); bytes is all of them.
	cum   []int
	bytes int
}

const (
	// historyCacheConvs and historyCacheBytes bound the cache: the views of
	// the conversations in use, not of every conversation ever seen, and
	// little of conch's memory (a view of a 32k-token window is about
	// 100 KiB; one over a quarter of the bytes is not kept, and is read
	// whole each turn as before).
	historyCacheConvs = 256
	historyCacheBytes = 8 << 20
)

func newHistoryCache() *historyCache {
	return &historyCache{entries: map[int64]*list.Element{}, reading: map[int64]*historyRead{},
		maxBytes: historyCacheBytes, maxConvs: historyCacheConvs}
}

// historyToken ties an end to its begin: the entry begin copied from and
// how many of its messages it copied.
type historyToken struct {
	e *historyEntry
	n int
}

// begin starts a read of conversation conv (generation gen, newest
// summary id summary) through turn through and returns the cached prefix:
// the messages of turns before from, the caller reads on from turn from.
// ok is false when there is none: the caller reads from the summary on.
// Every begin is followed by one end with the token.
func (c *historyCache) begin(conv, gen, summary, through int64) (msgs []conch.Message, pos []conch.HistoryPos, from int64, tok historyToken, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reading[conv]
	if r == nil {
		r = &historyRead{}
		c.reading[conv] = r
	}
	r.n++
	el, found := c.entries[conv]
	if !found {
		c.misses++
		return nil, nil, 0, tok, false
	}
	e := el.Value.(*historyEntry)
	if e.gen != gen || e.summary != summary || through < e.through {
		c.misses++
		return nil, nil, 0, tok, false
	}
	c.lru.MoveToFront(el)
	c.hits++
	n := len(e.pos)
	for n > 0 && int64(e.pos[n-1].Turn) >= e.stable {
		n--
	}
	// The caller's own copy: the entry's slices are never handed out.
	msgs = make([]conch.Message, n, n+8)
	copy(msgs, e.msgs[:n])
	pos = make([]conch.HistoryPos, n, n+8)
	copy(pos, e.pos[:n])
	return msgs, pos, e.stable, historyToken{e: e, n: n}, true
}

// end ends a read begun with begin. With keep it keeps the view read
// (through turn through, stable as described on historyCache), unless the
// conversation was written to while it was read. When the entry begin
// copied from is still there, only what was read after its prefix is
// copied into it; otherwise msgs and pos are copied into a new entry.
func (c *historyCache) end(tok historyToken, keep bool, conv, gen, summary, through, stable int64, msgs []conch.Message, pos []conch.HistoryPos) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reading[conv]
	if r.n--; r.n == 0 {
		delete(c.reading, conv)
	}
	if !keep || r.dirty {
		return
	}
	e := tok.e
	if el, ok := c.entries[conv]; !ok || e == nil || el.Value.(*historyEntry) != e || len(e.msgs) < tok.n {
		c.removeLocked(conv)
		e = &historyEntry{conv: conv, gen: gen, summary: summary}
		c.entries[conv] = c.lru.PushFront(e)
		tok.n = 0
	} else {
		c.lru.MoveToFront(el)
	}
	c.bytes -= e.bytes
	e.through, e.stable = through, stable
	e.msgs = append(e.msgs[:tok.n], msgs[tok.n:]...)
	e.pos = append(e.pos[:tok.n], pos[tok.n:]...)
	e.cum = e.cum[:tok.n]
	size := 0
	if tok.n > 0 {
		size = e.cum[tok.n-1]
	}
	for _, m := range msgs[tok.n:] {
		size += messageBytes(m)
		e.cum = append(e.cum, size)
	}
	e.bytes = size
	c.bytes += size
	if size > c.maxBytes/4 {
		c.removeLocked(conv) // one view must not push out all the others
	}
	for (c.bytes > c.maxBytes || len(c.entries) > c.maxConvs) && c.lru.Len() > 0 {
		c.removeLocked(c.lru.Back().Value.(*historyEntry).conv)
	}
}

// written says turn of conversation conv changed (turn 0: whatever in
// it): the entry goes when the turn is one it keeps as ended, and reads in
// flight store nothing.
func (c *historyCache) written(conv int64, turn conch.TurnID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.reading[conv]; r != nil {
		r.dirty = true
	}
	el, ok := c.entries[conv]
	if !ok {
		return
	}
	if e := el.Value.(*historyEntry); turn != 0 && int64(turn) >= e.stable {
		return // read again at every lookup anyway
	}
	c.removeLocked(conv)
}

func (c *historyCache) removeLocked(conv int64) {
	el, ok := c.entries[conv]
	if !ok {
		return
	}
	c.bytes -= el.Value.(*historyEntry).bytes
	c.lru.Remove(el)
	delete(c.entries, conv)
}

// messageBytes is about what a message holds in memory.
func messageBytes(m conch.Message) int {
	n := 128 + len(m.Text)
	for _, tc := range m.ToolCalls {
		n += 64 + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
	}
	if r := m.ToolResult; r != nil {
		n += 64 + len(r.CallID) + len(r.Name) + len(r.Content)
	}
	return n
}
