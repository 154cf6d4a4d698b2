package tool

import (
	"fmt"
	"strings"
)

// Command is a command line split into words the way a POSIX shell splits
// them, for running WITHOUT a shell.
type Command struct {
	// Env holds leading NAME=value assignments ("FOO=1 make" sets FOO for make).
	Env []string
	// Argv is the program and its arguments.
	Argv []string
}

// ShellErrorKind classifies why a command line cannot run without a shell.
type ShellErrorKind int

// Shell error kinds.
const (
	// ShellOperator: a pipe, redirect, &&, ||, ;, &, a parenthesis or a line break.
	ShellOperator ShellErrorKind = iota + 1
	// ShellSubstitution: backticks or $(...).
	ShellSubstitution
	// ShellExpansion: $NAME, ${NAME}, $1, $? and the like.
	ShellExpansion
	// ShellGlob: an unquoted *, ? or [.
	ShellGlob
	// ShellTilde: a ~ that a shell would turn into a home directory.
	ShellTilde
	// ShellQuote: an unterminated quote or a trailing backslash.
	ShellQuote
	// ShellBadInput: NUL bytes, an empty command, only assignments.
	ShellBadInput
)

// ShellError explains why a command line was refused. Pos is a byte offset
// into the line; Token is the offending text.
type ShellError struct {
	Kind  ShellErrorKind
	Pos   int
	Token string
	Msg   string
}

func (e *ShellError) Error() string { return e.Msg }

// SplitCommand splits line into words with shell quoting rules: single
// quotes keep everything literally; double quotes keep everything but \\,
// \", \$ and \` escapes; a backslash outside quotes escapes the next
// character; a backslash-newline joins lines; an unquoted # at the start
// of a word begins a comment. Nothing is expanded, so anything whose
// meaning needs a shell (operators, substitutions, variables, globs, a
// leading ~) is refused with a *ShellError rather than passed on with a
// different meaning.
func SplitCommand(line string) (Command, error) {
	s := &splitter{line: line}
	if err := s.split(); err != nil {
		return Command{}, err
	}
	var cmd Command
	for i, w := range s.words {
		if len(cmd.Argv) == 0 && w.assignment() {
			cmd.Env = append(cmd.Env, w.text.String())
			continue
		}
		cmd.Argv = append(cmd.Argv, s.words[i].text.String())
	}
	if len(cmd.Argv) == 0 {
		if len(cmd.Env) > 0 {
			return Command{}, &ShellError{Kind: ShellBadInput, Msg: "the command only sets variables (NAME=value) and runs nothing; without a shell, variables do not carry over to later calls"}
		}
		return Command{}, &ShellError{Kind: ShellBadInput, Msg: "the command is empty"}
	}
	return cmd, nil
}

type word struct {
	text strings.Builder
	// literal is how many leading bytes of text came from unquoted,
	// unescaped characters; only those may form a NAME= prefix.
	literal int
	quoted  bool // some part was quoted or escaped
}

// assignment reports whether the word is NAME=value with an unquoted NAME=.
func (w *word) assignment() bool {
	t := w.text.String()
	eq := strings.IndexByte(t, '=')
	if eq <= 0 || eq >= w.literal {
		return false
	}
	for i := 0; i < eq; i++ {
		c := t[i]
		if c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

type splitter struct {
	line  string
	words []*word
	cur   *word
}

func (s *splitter) start() *word {
	if s.cur == nil {
		s.cur = &word{}
		s.words = append(s.words, s.cur)
	}
	return s.cur
}

// lit appends an unquoted character.
func (s *splitter) lit(c byte) {
	w := s.start()
	w.text.WriteByte(c)
	if !w.quoted {
		w.literal = w.text.Len()
	}
}

// quotedByte appends a quoted or escaped character.
func (s *splitter) quotedByte(c byte) {
	w := s.start()
	w.quoted = true
	w.text.WriteByte(c)
}

func (s *splitter) split() error {
	line := s.line
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == 0:
			return &ShellError{Kind: ShellBadInput, Pos: i, Token: "\\0", Msg: fmt.Sprintf("the command contains a NUL byte at offset %d; programs cannot receive NUL bytes", i)}
		case c == ' ' || c == '\t':
			s.cur = nil
		case c == '\n' || c == '\r':
			if c == '\r' && i+1 < len(line) && line[i+1] == '\n' {
				i++
			}
			if strings.TrimSpace(line[i+1:]) == "" {
				s.cur = nil // a trailing line break ends the command
				continue
			}
			return operatorErr(i, "a line break", "\\n")
		case c == '\\':
			if i+1 >= len(line) {
				return &ShellError{Kind: ShellQuote, Pos: i, Token: "\\", Msg: "the command ends with a backslash that escapes nothing"}
			}
			i++
			if line[i] == '\n' {
				continue // line continuation
			}
			s.quotedByte(line[i])
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return &ShellError{Kind: ShellQuote, Pos: i, Token: "'", Msg: fmt.Sprintf("unterminated single quote starting at offset %d: %s", i, excerpt(line, i))}
			}
			w := s.start()
			w.quoted = true
			w.text.WriteString(line[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			n, err := s.doubleQuoted(i)
			if err != nil {
				return err
			}
			i = n
		case c == '`':
			return &ShellError{Kind: ShellSubstitution, Pos: i, Token: "`", Msg: fmt.Sprintf("the command uses a backtick command substitution (at offset %d)", i)}
		case c == '$':
			if err := dollar(line, i); err != nil {
				return err
			}
			s.lit(c)
		case c == '|' || c == '&' || c == ';' || c == '<' || c == '>' || c == '(' || c == ')':
			return s.operator(i)
		case c == '*' || c == '?' || c == '[':
			return &ShellError{Kind: ShellGlob, Pos: i, Token: string(c), Msg: fmt.Sprintf("the command uses an unquoted %c (a glob pattern) at offset %d: %s", c, i, excerpt(line, i))}
		case c == '~' && s.cur == nil:
			return &ShellError{Kind: ShellTilde, Pos: i, Token: "~", Msg: fmt.Sprintf("the command starts a word with ~ (at offset %d), which only a shell turns into a home directory", i)}
		case c == '#' && s.cur == nil:
			// A comment runs to the end of the line; a later line would be
			// a second command.
			nl := strings.IndexAny(line[i:], "\r\n")
			if nl < 0 || strings.TrimSpace(line[i+nl:]) == "" {
				return nil
			}
			return operatorErr(i+nl, "a line break", "\\n")
		default:
			s.lit(c)
		}
	}
	return nil
}

// doubleQuoted consumes "…" starting at the quote at i; it returns the
// index of the closing quote.
func (s *splitter) doubleQuoted(i int) (int, error) {
	line := s.line
	w := s.start()
	w.quoted = true
	for j := i + 1; j < len(line); j++ {
		c := line[j]
		switch c {
		case '"':
			return j, nil
		case 0:
			return 0, &ShellError{Kind: ShellBadInput, Pos: j, Token: "\\0", Msg: fmt.Sprintf("the command contains a NUL byte at offset %d; programs cannot receive NUL bytes", j)}
		case '\\':
			if j+1 < len(line) {
				switch line[j+1] {
				case '\\', '"', '$', '`':
					j++
					w.text.WriteByte(line[j])
					continue
				case '\n':
					j++
					continue
				}
			}
			w.text.WriteByte(c)
		case '`':
			return 0, &ShellError{Kind: ShellSubstitution, Pos: j, Token: "`", Msg: fmt.Sprintf("the command uses a backtick command substitution inside double quotes (at offset %d)", j)}
		case '$':
			if err := dollar(line, j); err != nil {
				return 0, err
			}
			w.text.WriteByte(c)
		default:
			w.text.WriteByte(c)
		}
	}
	return 0, &ShellError{Kind: ShellQuote, Pos: i, Token: `"`, Msg: fmt.Sprintf("unterminated double quote starting at offset %d: %s", i, excerpt(line, i))}
}

// dollar refuses a $ that a shell would expand.
func dollar(line string, i int) error {
	if i+1 >= len(line) {
		return nil
	}
	n := line[i+1]
	switch {
	case n == '(':
		return &ShellError{Kind: ShellSubstitution, Pos: i, Token: "$(", Msg: fmt.Sprintf("the command uses a $(...) command substitution (at offset %d)", i)}
	case n == '{' || n == '_' || n >= 'A' && n <= 'Z' || n >= 'a' && n <= 'z' || n >= '0' && n <= '9' ||
		strings.IndexByte("@*#?$!-'\"", n) >= 0:
		tok := line[i:min(len(line), i+2)]
		if n == '{' {
			if end := strings.IndexByte(line[i:], '}'); end > 0 {
				tok = line[i : i+end+1]
			}
		} else if n == '_' || n >= 'A' && n <= 'Z' || n >= 'a' && n <= 'z' {
			j := i + 1
			for j < len(line) && (line[j] == '_' || line[j] >= 'A' && line[j] <= 'Z' || line[j] >= 'a' && line[j] <= 'z' || line[j] >= '0' && line[j] <= '9') {
				j++
			}
			tok = line[i:j]
		}
		return &ShellError{Kind: ShellExpansion, Pos: i, Token: tok, Msg: fmt.Sprintf("the command uses %s (at offset %d), which only a shell expands", tok, i)}
	}
	return nil
}

var operatorNames = map[string]string{
	"|":  "a pipe (|)",
	"||": "|| (run if the previous failed)",
	"&&": "&& (run if the previous succeeded)",
	"&":  "& (run in the background)",
	";":  "; (a command separator)",
	";;": ";;",
	"(":  "a parenthesis (a subshell)",
	")":  "a parenthesis (a subshell)",
}

// operator builds the error for the operator starting at i, naming the
// whole token (2>&1, >>, &&, |&, …).
func (s *splitter) operator(i int) error {
	line := s.line
	j := i
	for j < len(line) && strings.IndexByte("|&;<>()", line[j]) >= 0 {
		j++
	}
	for j < len(line) && line[j] >= '0' && line[j] <= '9' && strings.HasSuffix(line[i:j], "&") {
		j++ // >&2
	}
	start := i
	if w := s.cur; w != nil && !w.quoted && w.text.Len() == 1 && w.text.String()[0] >= '0' && w.text.String()[0] <= '9' && (line[i] == '>' || line[i] == '<') {
		start = i - 1 // 2>&1, 2>/dev/null
	}
	tok := line[start:j]
	if strings.ContainsAny(tok, "<>") {
		what := "a redirect (" + tok + ")"
		return &ShellError{Kind: ShellOperator, Pos: start, Token: tok, Msg: fmt.Sprintf("the command uses %s at offset %d", what, start)}
	}
	what, ok := operatorNames[tok]
	if !ok {
		what = tok
	}
	return operatorErr(start, what, tok)
}

func operatorErr(pos int, what, tok string) error {
	return &ShellError{Kind: ShellOperator, Pos: pos, Token: tok, Msg: fmt.Sprintf("the command uses %s at offset %d", what, pos)}
}

// excerpt shows the line around offset i.
func excerpt(line string, i int) string {
	from, to := max(0, i-20), min(len(line), i+20)
	s := line[from:to]
	if from > 0 {
		s = "…" + s
	}
	if to < len(line) {
		s += "…"
	}
	return fmt.Sprintf("%q", s)
}
