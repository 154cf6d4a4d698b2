package telegram

import (
	"encoding/json"
	"net/http"
	"time"
)

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p reqParams) {
	offset, _ := p.int("offset")
	limit, ok := p.int("limit")
	if !ok || limit <= 0 || limit > maxUpdateLimit {
		limit = maxUpdateLimit
	}
	timeout, _ := p.int("timeout")
	s.mu.Lock()
	s.pollGen++
	gen := s.pollGen
	s.offsets = append(s.offsets, offset)
	if raw, ok := p["allowed_updates"]; ok {
		var list []string
		if err := json.Unmarshal([]byte(raw), &list); err != nil {
			s.mu.Unlock()
			badRequest(w, "can't parse allowed updates JSON array")
			return
		}
		s.allowed = list
	}
	switch {
	case offset > 0:
		i := 0
		for i < len(s.updates) && s.updates[i].UpdateID < offset {
			i++
		}
		s.updates = s.updates[i:]
	case offset < 0:
		if keep := int(-offset); len(s.updates) > keep {
			s.updates = s.updates[len(s.updates)-keep:]
		}
	}
	s.notifyLocked() // an older poll ends with 409
	deadline := time.Now().Add(time.Duration(timeout) * time.Second)
	for {
		var out []Update
		kept := s.updates[:0:0]
		for _, u := range s.updates {
			if !s.allowedLocked(u.kind()) {
				continue // the real server never stores updates of types not asked for
			}
			kept = append(kept, u)
			if u.UpdateID >= offset && int64(len(out)) < limit {
				out = append(out, u)
			}
		}
		s.updates = kept
		if len(out) > 0 || timeout <= 0 || !time.Now().Before(deadline) {
			s.mu.Unlock()
			if out == nil {
				out = []Update{}
			}
			writeOK(w, out)
			return
		}
		ch := s.changed
		s.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
		t.Stop()
		s.mu.Lock()
		if s.pollGen != gen {
			s.mu.Unlock()
			writeError(w, http.StatusConflict, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running", 0)
			return
		}
	}
}

func (s *Server) allowedLocked(kind string) bool {
	if len(s.allowed) == 0 {
		return kind != "chat_member" && kind != "message_reaction" && kind != "message_reaction_count"
	}
	for _, a := range s.allowed {
		if a == kind {
			return true
		}
	}
	return false
}
