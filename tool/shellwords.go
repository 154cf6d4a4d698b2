package tool

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
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
	// ShellOperator: a pipe, redirect (here-documents too), &&, ||, ;, &, a
	// parenthesis, a line break, or a shell keyword (if, for, [[, …).
	ShellOperator ShellErrorKind = iota + 1
	// ShellSubstitution: backticks, $(...), <(...).
	ShellSubstitution
	// ShellExpansion: $NAME, ${NAME}, $1, $?, $((...)), $'...', $"..." and
	// the like.
	ShellExpansion
	// ShellGlob: an unquoted *, ? or [, an extended glob, a brace expansion.
	ShellGlob
	// ShellTilde: a ~ that a shell would turn into a home directory.
	ShellTilde
	// ShellQuote: an unterminated quote or a trailing backslash.
	ShellQuote
	// ShellBadInput: NUL bytes, invalid UTF-8, an empty command, only
	// assignments, a line the parser cannot read.
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

// SplitCommand splits line into words with bash's quoting rules, parsed by
// mvdan.cc/sh: single quotes keep everything literally; double quotes keep
// everything but \\, \", \$ and \` escapes; a backslash outside quotes
// escapes the next character; a backslash-newline joins lines; a comment
// runs to the end of the line. Nothing is expanded, so anything whose
// meaning needs a shell (operators, redirects and here-documents,
// substitutions, variables, globs and brace expansions, a leading ~, shell
// keywords) is refused with a *ShellError rather than passed on with a
// different meaning. When a line has several problems, the first one in the
// line is reported.
//
// Two shell words are kept as programs, as a shell-less exec runs them:
// "time ls" runs the time program, and declaration builtins (export,
// declare, …) come back as their name and arguments, for the caller to
// refuse with a hint.
func SplitCommand(line string) (Command, error) {
	if i := strings.IndexByte(line, 0); i >= 0 {
		return Command{}, &ShellError{Kind: ShellBadInput, Pos: i, Token: "\\0", Msg: fmt.Sprintf("the command contains a NUL byte at offset %d; programs cannot receive NUL bytes", i)}
	}
	if err := checkRunes(line); err != nil {
		return Command{}, err
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil {
		return Command{}, parseError(line, err)
	}
	c := &checker{line: line}
	for _, st := range f.Stmts {
		syntax.Walk(st, c.visit)
	}
	if len(f.Stmts) > 1 {
		end := int(f.Stmts[0].End().Offset())
		if nl := strings.IndexByte(line[end:], '\n'); nl >= 0 {
			c.report(operatorErr(end+nl, "a line break", "\\n"))
		}
	}
	if c.err != nil {
		return Command{}, c.err
	}
	if len(f.Stmts) == 0 {
		return Command{}, &ShellError{Kind: ShellBadInput, Msg: "the command is empty"}
	}
	cmd, err := c.command(f.Stmts[0])
	if err != nil {
		return Command{}, err
	}
	if len(cmd.Argv) == 0 {
		if len(cmd.Env) > 0 {
			return Command{}, &ShellError{Kind: ShellBadInput, Msg: "the command only sets variables (NAME=value) and runs nothing; without a shell, variables do not carry over to later calls"}
		}
		return Command{}, &ShellError{Kind: ShellBadInput, Msg: "the command is empty"}
	}
	return cmd, nil
}

// checkRunes refuses what the parser cannot read: invalid UTF-8 (JSON
// arguments never carry it) and U+0080 and U+0081, which mvdan.cc/sh uses
// internally as end-of-input and escaped-newline markers (it would cut the
// line short or fail on a quote).
func checkRunes(line string) error {
	for i, r := range line {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(line[i:]); n <= 1 {
				return &ShellError{Kind: ShellBadInput, Pos: i, Token: line[i : i+1], Msg: fmt.Sprintf("the command is not valid UTF-8 at offset %d", i)}
			}
		case r == 0x80 || r == 0x81:
			return &ShellError{Kind: ShellBadInput, Pos: i, Token: string(r), Msg: fmt.Sprintf("the command contains the control character U+%04X at offset %d, which the shell parser cannot read", r, i)}
		}
	}
	return nil
}

// checker walks a parsed line and keeps the first problem in it.
type checker struct {
	line string
	err  *ShellError
	// quotedSubst marks backtick substitutions inside double quotes.
	quotedSubst map[*syntax.CmdSubst]bool
}

func (c *checker) report(e *ShellError) {
	if c.err == nil || e.Pos < c.err.Pos {
		c.err = e
	}
}

// src is the line's text from p to end.
func (c *checker) src(p, end syntax.Pos) string {
	from, to := int(p.Offset()), int(end.Offset())
	if from < 0 || to > len(c.line) || from > to {
		return ""
	}
	return c.line[from:to]
}

// keyword reports a shell keyword or builtin that needs a shell.
func (c *checker) keyword(pos syntax.Pos, what string) {
	tok := c.line[min(int(pos.Offset()), len(c.line)):]
	if strings.HasPrefix(tok, "((") {
		tok = "(("
	} else if i := strings.IndexAny(tok, " \t\r\n;&|()"); i > 0 {
		tok = tok[:i]
	} else if i == 0 {
		tok = tok[:1]
	}
	c.report(&ShellError{Kind: ShellOperator, Pos: int(pos.Offset()), Token: tok,
		Msg: fmt.Sprintf("the command uses %s (%s at offset %d), which only a shell runs", what, tok, pos.Offset())})
}

func (c *checker) visit(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.Stmt:
		c.stmt(n)
	case *syntax.BinaryCmd:
		tok := n.Op.String()
		what, ok := operatorNames[tok]
		if !ok {
			what = tok
		}
		c.report(operatorErr(int(n.OpPos.Offset()), what, tok))
	case *syntax.Subshell:
		c.report(operatorErr(int(n.Lparen.Offset()), operatorNames["("], "("))
	case *syntax.Block:
		c.keyword(n.Lbrace, "a { } group")
	case *syntax.IfClause:
		c.keyword(n.Position, "the shell keyword if")
	case *syntax.WhileClause:
		c.keyword(n.WhilePos, "a shell loop")
	case *syntax.ForClause:
		c.keyword(n.ForPos, "a shell loop")
	case *syntax.CaseClause:
		c.keyword(n.Case, "the shell keyword case")
	case *syntax.FuncDecl:
		c.keyword(n.Pos(), "a function definition")
	case *syntax.ArithmCmd:
		c.keyword(n.Left, "shell arithmetic")
	case *syntax.TestClause:
		c.keyword(n.Left, "a [[ ]] test")
	case *syntax.LetClause:
		c.keyword(n.Let, "the shell builtin let")
	case *syntax.CoprocClause:
		c.keyword(n.Coproc, "a coprocess")
	case *syntax.Word:
		c.word(n)
	case *syntax.Assign:
		c.assign(n)
	case *syntax.DblQuoted:
		if n.Dollar {
			c.expansion(n.Left, `$"`, `$"..." (a translated string)`)
		}
		for _, p := range n.Parts {
			if cs, ok := p.(*syntax.CmdSubst); ok {
				if c.quotedSubst == nil {
					c.quotedSubst = map[*syntax.CmdSubst]bool{}
				}
				c.quotedSubst[cs] = true
			}
		}
	case *syntax.SglQuoted:
		if n.Dollar {
			c.expansion(n.Left, "$'", "$'...' (ANSI-C quoting)")
		}
	case *syntax.ParamExp:
		tok := c.src(n.Pos(), n.End())
		c.expansion(n.Pos(), tok, tok)
	case *syntax.ArithmExp:
		c.expansion(n.Left, "$((", "$((...)) (shell arithmetic)")
	case *syntax.CmdSubst:
		pos := int(n.Left.Offset())
		if n.Backquotes {
			where := ""
			if c.quotedSubst[n] {
				where = " inside double quotes"
			}
			c.report(&ShellError{Kind: ShellSubstitution, Pos: pos, Token: "`", Msg: fmt.Sprintf("the command uses a backtick command substitution%s (at offset %d)", where, pos)})
		} else {
			c.report(&ShellError{Kind: ShellSubstitution, Pos: pos, Token: "$(", Msg: fmt.Sprintf("the command uses a $(...) command substitution (at offset %d)", pos)})
		}
	case *syntax.ProcSubst:
		pos := int(n.OpPos.Offset())
		tok := n.Op.String()
		c.report(&ShellError{Kind: ShellSubstitution, Pos: pos, Token: tok, Msg: fmt.Sprintf("the command uses a process substitution %s...) (at offset %d)", tok, pos)})
	case *syntax.ExtGlob:
		pos := int(n.OpPos.Offset())
		tok := n.Op.String()
		c.report(&ShellError{Kind: ShellGlob, Pos: pos, Token: tok, Msg: fmt.Sprintf("the command uses an extended glob pattern %s...) at offset %d: %s", tok, pos, excerpt(c.line, pos))})
	}
	return true
}

func (c *checker) expansion(pos syntax.Pos, tok, what string) {
	c.report(&ShellError{Kind: ShellExpansion, Pos: int(pos.Offset()), Token: tok,
		Msg: fmt.Sprintf("the command uses %s (at offset %d), which only a shell expands", what, pos.Offset())})
}

func (c *checker) stmt(st *syntax.Stmt) {
	if st.Negated {
		c.report(operatorErr(int(st.Position.Offset()), "! (negate the exit status)", "!"))
	}
	if st.Semicolon.IsValid() { // ; or &
		pos := int(st.Semicolon.Offset())
		tok := c.line[pos : pos+1]
		c.report(operatorErr(pos, operatorNames[tok], tok))
	}
	for _, r := range st.Redirs {
		c.redirect(r)
	}
}

// redirect reports a redirect, named by its whole token (2>&1, >>, <<, …).
func (c *checker) redirect(r *syntax.Redirect) {
	tok := r.Op.String()
	if r.N != nil {
		tok = r.N.Value + tok
	}
	if strings.HasSuffix(tok, "&") && r.Word != nil && len(r.Word.Parts) == 1 {
		if l, ok := r.Word.Parts[0].(*syntax.Lit); ok && isDigits(l.Value) {
			tok += l.Value // >&2
		}
	}
	what := "a redirect (" + tok + ")"
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		what = "a redirect (" + tok + ", a here-document)"
	case syntax.WordHdoc:
		what = "a redirect (" + tok + ", a here-string)"
	}
	pos := int(r.Pos().Offset())
	c.report(&ShellError{Kind: ShellOperator, Pos: pos, Token: tok, Msg: fmt.Sprintf("the command uses %s at offset %d", what, pos)})
}

func (c *checker) assign(a *syntax.Assign) {
	switch {
	case a.Append:
		c.expansion(a.Pos(), a.Name.Value+"+=", a.Name.Value+"+= (appending to a shell variable)")
	case a.Index != nil:
		c.expansion(a.Pos(), a.Name.Value+"[", "an indexed assignment "+a.Name.Value+"[...]")
	case a.Array != nil:
		pos := int(a.Array.Lparen.Offset())
		c.report(operatorErr(pos, "a parenthesis (an array assignment)", "("))
	}
}

// word refuses what a shell would expand in the unquoted parts of a word:
// a leading ~, glob characters and brace expansions.
func (c *checker) word(w *syntax.Word) {
	if len(w.Parts) == 0 {
		return
	}
	if l, ok := w.Parts[0].(*syntax.Lit); ok && strings.HasPrefix(l.Value, "~") {
		pos := int(l.Pos().Offset())
		c.report(&ShellError{Kind: ShellTilde, Pos: pos, Token: "~", Msg: fmt.Sprintf("the command starts a word with ~ (at offset %d), which only a shell turns into a home directory", pos)})
	}
	for _, p := range w.Parts {
		l, ok := p.(*syntax.Lit)
		if !ok {
			continue
		}
		for i := 0; i < len(l.Value); i++ {
			switch ch := l.Value[i]; ch {
			case '\\':
				i++
			case '*', '?', '[':
				pos := int(l.Pos().Offset()) + i
				c.report(&ShellError{Kind: ShellGlob, Pos: pos, Token: string(ch), Msg: fmt.Sprintf("the command uses an unquoted %c (a glob pattern) at offset %d: %s", ch, pos, excerpt(c.line, pos))})
			}
		}
	}
	if hasBraceExpansion(w) {
		pos := int(w.Pos().Offset())
		tok := c.src(w.Pos(), w.End())
		c.report(&ShellError{Kind: ShellGlob, Pos: pos, Token: tok, Msg: fmt.Sprintf("the command uses a brace expansion %s at offset %d, which only a shell expands", tok, pos)})
	}
}

// hasBraceExpansion reports whether bash would expand braces in w:
// {a,b} or {1..3}, unquoted and unescaped ({} and {a} stay as they are).
func hasBraceExpansion(w *syntax.Word) bool {
	// SplitBraces rewrites the word it is given: give it a copy, with
	// escaped characters masked (it does not know escapes).
	cp := &syntax.Word{}
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && strings.Contains(l.Value, `\`) {
			v := []byte(l.Value)
			for i := 0; i < len(v); i++ {
				if v[i] == '\\' && i+1 < len(v) {
					v[i], v[i+1] = 0, 0
					i++
				}
			}
			p = &syntax.Lit{ValuePos: l.ValuePos, ValueEnd: l.ValueEnd, Value: string(v)}
		}
		cp.Parts = append(cp.Parts, p)
	}
	if !syntax.SplitBraces(cp) {
		return false
	}
	for _, p := range cp.Parts {
		if b, ok := p.(*syntax.BraceExp); ok && (b.Sequence || len(b.Elems) > 1) {
			return true
		}
	}
	return false
}

// command builds the Command of a statement that passed the checks.
func (c *checker) command(st *syntax.Stmt) (Command, error) {
	var cmd Command
	switch x := st.Cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		for _, a := range x.Assigns {
			v, err := c.text(a.Value)
			if err != nil {
				return Command{}, err
			}
			cmd.Env = append(cmd.Env, a.Name.Value+"="+v)
		}
		for _, w := range x.Args {
			v, err := c.text(w)
			if err != nil {
				return Command{}, err
			}
			cmd.Argv = append(cmd.Argv, v)
		}
	case *syntax.TimeClause:
		// Without a shell, time is the program /usr/bin/time.
		cmd.Argv = []string{"time"}
		if x.PosixFormat {
			cmd.Argv = append(cmd.Argv, "-p")
		}
		if x.Stmt != nil {
			inner, err := c.command(x.Stmt)
			if err != nil {
				return Command{}, err
			}
			cmd.Argv = append(append(cmd.Argv, inner.Env...), inner.Argv...)
		}
	case *syntax.DeclClause:
		cmd.Argv = []string{x.Variant.Value}
		for _, a := range x.Args {
			v, err := c.text(a.Value)
			if err != nil {
				return Command{}, err
			}
			switch {
			case a.Naked && a.Name != nil:
				v = a.Name.Value
			case !a.Naked:
				v = a.Name.Value + "=" + v
			}
			cmd.Argv = append(cmd.Argv, v)
		}
	default:
		// Every other command is refused by the checks; this is a guard.
		pos := int(st.Pos().Offset())
		return Command{}, &ShellError{Kind: ShellOperator, Pos: pos, Token: c.src(st.Pos(), st.End()), Msg: fmt.Sprintf("the command at offset %d is not a simple command", pos)}
	}
	return cmd, nil
}

// text is a checked word with its quotes removed; nil is "".
func (c *checker) text(w *syntax.Word) (string, error) {
	if w == nil {
		return "", nil
	}
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := p.Value
			for i := 0; i < len(v); i++ {
				if v[i] != '\\' {
					b.WriteByte(v[i])
					continue
				}
				if i+1 >= len(v) {
					if end := int(p.End().Offset()); strings.TrimRight(c.line[min(end, len(c.line)):], " \t\r\n") == "" {
						pos := int(p.Pos().Offset()) + i
						return "", &ShellError{Kind: ShellQuote, Pos: pos, Token: `\`, Msg: "the command ends with a backslash that escapes nothing"}
					}
					b.WriteByte('\\')
					continue
				}
				i++
				if v[i] != '\n' { // a backslash-newline joins lines
					b.WriteByte(v[i])
				}
			}
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", fmt.Errorf("split command: unchecked %T in double quotes", q)
				}
				b.WriteString(unescapeDouble(l.Value))
			}
		default:
			return "", fmt.Errorf("split command: unchecked %T in a word", p)
		}
	}
	return b.String(), nil
}

// unescapeDouble removes the escapes that count inside double quotes.
func unescapeDouble(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '\\', '"', '$', '`':
				i++
				b.WriteByte(v[i])
				continue
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// parseError turns what the parser could not read into a *ShellError,
// judged by the text at the error's position.
func parseError(line string, err error) error {
	var pe syntax.ParseError
	var le syntax.LangError
	var pos int
	var text string
	switch {
	case errors.As(err, &pe):
		pos, text = int(pe.Pos.Offset()), pe.Text
	case errors.As(err, &le):
		pos, text = int(le.Pos.Offset()), le.Error()
	default:
		return fmt.Errorf("split command: %w", err)
	}
	pos = min(max(pos, 0), len(line))
	rest := line[pos:]
	switch {
	case strings.HasPrefix(rest, "'"), strings.HasPrefix(rest, "$'"):
		pos += strings.IndexByte(rest, '\'')
		return &ShellError{Kind: ShellQuote, Pos: pos, Token: "'", Msg: fmt.Sprintf("unterminated single quote starting at offset %d: %s", pos, excerpt(line, pos))}
	case strings.HasPrefix(rest, `"`), strings.HasPrefix(rest, `$"`):
		pos += strings.IndexByte(rest, '"')
		return &ShellError{Kind: ShellQuote, Pos: pos, Token: `"`, Msg: fmt.Sprintf("unterminated double quote starting at offset %d: %s", pos, excerpt(line, pos))}
	case strings.HasPrefix(rest, "`"):
		return &ShellError{Kind: ShellSubstitution, Pos: pos, Token: "`", Msg: fmt.Sprintf("the command uses a backtick command substitution (at offset %d)", pos)}
	case strings.HasPrefix(rest, "$("):
		return &ShellError{Kind: ShellSubstitution, Pos: pos, Token: "$(", Msg: fmt.Sprintf("the command uses a $(...) command substitution (at offset %d)", pos)}
	case rest != "" && strings.IndexByte("|&;<>()", rest[0]) >= 0:
		return operatorAt(line, pos)
	}
	return &ShellError{Kind: ShellBadInput, Pos: pos, Token: "", Msg: fmt.Sprintf("the command cannot be read as one shell command: %s (at offset %d)", text, pos)}
}

var operatorNames = map[string]string{
	"|":  "a pipe (|)",
	"|&": "a pipe (|&)",
	"||": "|| (run if the previous failed)",
	"&&": "&& (run if the previous succeeded)",
	"&":  "& (run in the background)",
	";":  "; (a command separator)",
	";;": ";;",
	"(":  "a parenthesis (a subshell)",
	")":  "a parenthesis (a subshell)",
}

// operatorAt builds the error for the operator starting at i, naming the
// whole token (2>&1, >>, &&, <<, …).
func operatorAt(line string, i int) error {
	j := i
	for j < len(line) && strings.IndexByte("|&;<>()", line[j]) >= 0 {
		j++
	}
	for j < len(line) && line[j] >= '0' && line[j] <= '9' && strings.HasSuffix(line[i:j], "&") {
		j++ // >&2
	}
	start := i
	if (line[i] == '>' || line[i] == '<') && i > 0 && line[i-1] >= '0' && line[i-1] <= '9' && (i == 1 || strings.IndexByte(" \t", line[i-2]) >= 0) {
		start = i - 1 // 2>&1, 2>/dev/null
	}
	tok := line[start:j]
	if strings.ContainsAny(tok, "<>") {
		what := "a redirect (" + tok + ")"
		if strings.HasPrefix(tok, "<<") && !strings.HasPrefix(tok, "<<<") {
			what = "a redirect (" + tok + ", a here-document)"
		}
		return &ShellError{Kind: ShellOperator, Pos: start, Token: tok, Msg: fmt.Sprintf("the command uses %s at offset %d", what, start)}
	}
	what, ok := operatorNames[tok]
	if !ok {
		what = tok
	}
	return operatorErr(start, what, tok)
}

func operatorErr(pos int, what, tok string) *ShellError {
	return &ShellError{Kind: ShellOperator, Pos: pos, Token: tok, Msg: fmt.Sprintf("the command uses %s at offset %d", what, pos)}
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
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
