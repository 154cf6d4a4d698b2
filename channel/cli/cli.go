// Package cli is the terminal channel: one line in is one message, replies go
// to standard output, notices and progress to standard error.
package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"conch"
)

// MaxLine is the longest line accepted, in bytes.
const MaxLine = 1 << 20

// Channel reads messages from In and writes replies to Out and the rest to Err.
type Channel struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// Key is the conversation the terminal talks in.
	Key  conch.ConversationKey
	User conch.UserID
	// Prompt, if set, is written to Err before each line is read
	// (interactive use).
	Prompt string
	Now    func() time.Time

	mu sync.Mutex // serialises writes
}

var _ conch.Channel = (*Channel)(nil)

// Name implements conch.Channel.
func (c *Channel) Name() conch.ChannelName { return conch.ChannelCLI }

// ErrEOF is returned by Run when the input ended.
var ErrEOF = errors.New("cli: end of input")

// Run implements conch.Channel. It returns ErrEOF at the end of the input.
func (c *Channel) Run(ctx context.Context, h conch.Handler) error {
	lines := make(chan string)
	errc := make(chan error, 1)
	go func() {
		br := bufio.NewReaderSize(c.In, 64*1024)
		for n := 1; ; n++ {
			c.prompt()
			line, tooLong, err := readLine(br, MaxLine)
			if tooLong {
				// Report and go on: the next line is read as usual.
				c.write(c.Err, fmt.Sprintf("error: line %d is longer than %d bytes, so it was not sent; send it as a file or in parts", n, MaxLine))
			} else if line != "" || err == nil {
				select {
				case lines <- line:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				errc <- err
				return
			}
		}
	}()
	now := c.Now
	if now == nil {
		now = time.Now
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if err != nil {
				return fmt.Errorf("cli: read input: %w", err)
			}
			return ErrEOF
		case line := <-lines:
			line = strings.TrimRight(line, "\r")
			if strings.TrimSpace(line) == "" {
				continue
			}
			in := conch.Inbound{Key: c.Key, Sender: c.User, Text: line, ReceivedAt: now()}
			if err := h.HandleInbound(ctx, in); err != nil {
				c.write(c.Err, "error: "+conch.UserMessage(err))
			}
		}
	}
}

func (c *Channel) prompt() {
	if c.Prompt != "" {
		c.mu.Lock()
		defer c.mu.Unlock()
		fmt.Fprint(c.Err, c.Prompt)
	}
}

// Send implements conch.Channel: replies to Out, everything else to Err.
func (c *Channel) Send(_ context.Context, out conch.Outbound) error {
	if out.Key != c.Key {
		return fmt.Errorf("cli: no conversation %s here", out.Key)
	}
	switch out.Kind {
	case conch.OutboundReply:
		return c.write(c.Out, out.Text)
	default:
		return c.write(c.Err, out.Text)
	}
}

func (c *Channel) write(w io.Writer, text string) error {
	text = Sanitize(text)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	_, err := io.WriteString(w, text)
	return err
}

// readLine reads one line without its newline. A line longer than limit is
// read to its end and dropped (tooLong), so the one after it is intact.
func readLine(br *bufio.Reader, limit int) (line string, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > limit+1 { // +1: the newline itself
			tooLong = true
			buf = nil
		}
		if !tooLong {
			buf = append(buf, chunk...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			return strings.TrimSuffix(string(buf), "\n"), tooLong, err
		}
		return strings.TrimSuffix(string(buf), "\n"), tooLong, nil
	}
}
