package telegram

import (
	"fmt"
	"net/http"
	"strings"
)

// Fault is an error the server answers instead of handling a request.
type Fault struct {
	Status      int
	Description string
	// RetryAfter is sent as parameters.retry_after (429).
	RetryAfter int
	// Times is how many requests get the fault (0 means 1).
	Times int
}

// TooManyRequests is the real 429 answer.
func TooManyRequests(retryAfter int) Fault {
	return Fault{Status: 429, Description: fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), RetryAfter: retryAfter}
}

// ServerError is a 5xx answer.
func ServerError(status int) Fault {
	return Fault{Status: status, Description: http.StatusText(status)}
}

// EntityParseError is the 400 the server gives for markup it cannot parse.
func EntityParseError() Fault {
	return Fault{Status: 400, Description: "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"}
}

// Fail makes the next f.Times requests of method (case-insensitive; "*"
// for any method) fail with f.
func (s *Server) Fail(method string, f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := strings.ToLower(method)
	s.faults[m] = append(s.faults[m], f)
}

func (s *Server) takeFaultLocked(method string) (Fault, bool) {
	for _, m := range []string{strings.ToLower(method), "*"} {
		q := s.faults[m]
		if len(q) == 0 {
			continue
		}
		f := q[0]
		q[0].Times--
		if q[0].Times <= 0 {
			s.faults[m] = q[1:]
		}
		return f, true
	}
	return Fault{}, false
}

// Block makes the bot blocked by the user of a private chat (403).
func (s *Server) Block(chatID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked[chatID] = true
}
