package tool

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// ApprovePolicy is the operator's tools.approve: glob patterns of commands
// the bash tool runs only once a person allowed them ("git push *",
// "rm -rf *"). It is matched on the parsed command, never on its raw text:
// each simple command the line would run is matched — the program itself,
// what wrappers run (env, sudo, nice, timeout, xargs, find -exec, …), and
// every simple command of a shell script given with `bash -c`/`sh -c` or
// `eval` (pipelines, lists, subshells, $(...) and <(...) included), after
// quotes and backslashes are resolved; a program named by its path also
// matches by its name (/usr/bin/git as git).
//
// It is a policy for the bash tool, not a boundary: it cannot see what a
// script file, an interpreter (python -c), a Makefile or an alias runs,
// words built at run time ($VAR, $(...) output) or options placed between
// the words of a pattern (git -C dir push for "git push *"); terminals, the
// code tool and MCP tools are not covered.
type ApprovePolicy struct {
	patterns []string
}

// NewApprovePolicy returns the policy of patterns: words separated by
// spaces, where * matches any run of characters (spaces and slashes
// included) and ? one character; a trailing " *" also matches nothing
// ("git push *" matches "git push"). An empty list needs no approvals.
func NewApprovePolicy(patterns []string) (*ApprovePolicy, error) {
	p := &ApprovePolicy{}
	for _, pat := range patterns {
		pat = strings.Join(strings.Fields(pat), " ")
		if pat == "" || pat == "*" {
			return nil, fmt.Errorf("tools.approve: %q is not a command pattern (name the program, e.g. \"git push *\")", pat)
		}
		p.patterns = append(p.patterns, pat)
	}
	return p, nil
}

// Empty reports whether the policy names no command.
func (p *ApprovePolicy) Empty() bool { return p == nil || len(p.patterns) == 0 }

// ApproveMatch is the pattern a command matched and the simple command
// (its words joined by spaces) that matched it.
type ApproveMatch struct {
	Pattern string
	Command string
}

// maxNesting bounds how deep scripts within scripts are followed; deeper
// ones match as if they named every pattern (a person decides).
const maxNesting = 8

// Match reports the first pattern one of the simple commands argv runs
// matches.
func (p *ApprovePolicy) Match(argv []string) (ApproveMatch, bool) {
	if p.Empty() || len(argv) == 0 {
		return ApproveMatch{}, false
	}
	for _, words := range SimpleCommands(argv) {
		if m, ok := p.matchWords(words); ok {
			return m, true
		}
	}
	return ApproveMatch{}, false
}

func (p *ApprovePolicy) matchWords(words []string) (ApproveMatch, bool) {
	if len(words) == 0 {
		return ApproveMatch{}, false
	}
	if words[0] == tooDeep {
		return ApproveMatch{Pattern: p.patterns[0], Command: "(scripts nested too deep to read)"}, true
	}
	full := strings.Join(words, " ")
	short := full
	if base := path.Base(words[0]); base != words[0] && strings.Contains(words[0], "/") {
		short = strings.Join(append([]string{base}, words[1:]...), " ")
	}
	for _, pat := range p.patterns {
		if globMatch(pat, full) || globMatch(pat, short) {
			return ApproveMatch{Pattern: pat, Command: full}, true
		}
	}
	return ApproveMatch{}, false
}

// tooDeep stands for the commands of a script nested past maxNesting.
const tooDeep = "\x00too-deep"

// SimpleCommands lists the simple commands (their words) running argv
// runs, argv itself first: through wrappers, shells' -c scripts, eval and
// find -exec. Words a shell would build at run time keep their source text
// ("$HOME").
func SimpleCommands(argv []string) [][]string {
	var out [][]string
	collect(argv, 0, &out)
	return out
}

func collect(argv []string, depth int, out *[][]string) {
	if len(argv) == 0 {
		return
	}
	if depth > maxNesting {
		*out = append(*out, []string{tooDeep})
		return
	}
	*out = append(*out, argv)
	name := path.Base(argv[0])
	args := argv[1:]
	switch name {
	case "env":
		collect(skipEnvArgs(args), depth+1, out)
	case "sudo", "doas":
		collect(skipOptions(args, "ugCDhprtUT"), depth+1, out)
	case "nice":
		collect(skipOptions(args, "n"), depth+1, out)
	case "ionice":
		collect(skipOptions(args, "cnpP"), depth+1, out)
	case "timeout":
		rest := skipOptions(args, "sk")
		if len(rest) > 0 {
			rest = rest[1:] // the duration
		}
		collect(rest, depth+1, out)
	case "stdbuf":
		collect(skipOptions(args, "ioe"), depth+1, out)
	case "nohup", "time", "setsid", "command", "exec", "builtin", "busybox", "unbuffer", "chronic", "nsenter", "flock", "xargs", "watch":
		switch name {
		case "xargs":
			args = skipOptions(args, "aEeIiLlnPsd")
		case "flock":
			args = skipOptions(args, "wEc")
			if len(args) > 0 {
				args = args[1:] // the lock file
			}
		case "watch":
			args = skipOptions(args, "nd")
		default:
			args = skipOptions(args, "")
		}
		collect(args, depth+1, out)
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "rbash":
		if script, ok := shellScript(args); ok {
			collectScript(script, depth+1, out)
		}
	case "eval":
		collectScript(strings.Join(args, " "), depth+1, out)
	case "find":
		for i := 0; i < len(args); i++ {
			switch args[i] {
			case "-exec", "-execdir", "-ok", "-okdir":
				j := i + 1
				for j < len(args) && args[j] != ";" && args[j] != "+" {
					j++
				}
				collect(args[i+1:j], depth+1, out)
				i = j
			}
		}
	}
}

// skipEnvArgs skips env's options and NAME=value words.
func skipEnvArgs(args []string) []string {
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--":
			return args[1:]
		case a == "-u" || a == "--unset" || a == "-C" || a == "--chdir" || a == "-S" || a == "--split-string":
			if a == "-S" || a == "--split-string" {
				// env -S "prog args": the string is split into words.
				if len(args) > 1 {
					return append(strings.Fields(args[1]), args[2:]...)
				}
				return nil
			}
			if len(args) < 2 {
				return nil
			}
			args = args[2:]
		case strings.HasPrefix(a, "-"):
			args = args[1:]
		case strings.Contains(a, "=") && !strings.HasPrefix(a, "="):
			args = args[1:]
		default:
			return args
		}
	}
	return nil
}

// skipOptions skips leading options; withArg are the short options that
// take the next word as their value (unless attached, as -n10).
func skipOptions(args []string, withArg string) []string {
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--":
			return args[1:]
		case len(a) == 2 && a[0] == '-' && strings.IndexByte(withArg, a[1]) >= 0:
			if len(args) < 2 {
				return nil
			}
			args = args[2:]
		case strings.HasPrefix(a, "--") && !strings.Contains(a, "="):
			args = args[1:]
		case strings.HasPrefix(a, "-") && len(a) > 1:
			args = args[1:]
		default:
			return args
		}
	}
	return nil
}

// shellScript finds the script of `sh [options] -c script …`: -c alone or
// among combined short options (-ec, -lc).
func shellScript(args []string) (string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "+o" || a == "-O" || a == "+O" || a == "--rcfile" || a == "--init-file":
			i++ // takes a value
		case a == "--" || !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "+"):
			return "", false
		case !strings.HasPrefix(a, "--") && strings.Contains(a, "c"):
			if i+1 < len(args) {
				return args[i+1], true
			}
			return "", false
		}
	}
	return "", false
}

// collectScript parses a shell script and collects every simple command
// in it, wherever it sits. A script the parser cannot read is matched as
// one line of words split on blanks (it would not run as written either).
func collectScript(script string, depth int, out *[][]string) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), "")
	if err != nil {
		collect(strings.Fields(script), depth, out)
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		words := make([]string, 0, len(call.Args))
		for _, w := range call.Args {
			words = append(words, wordText(script, w))
		}
		collect(words, depth, out)
		return true // $(...) within the words are commands too
	})
}

// wordText is a word's value when it is literal (quotes and escapes
// resolved), else its source text.
func wordText(src string, w *syntax.Word) string {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(p.Value, ""))
		case *syntax.SglQuoted:
			if p.Dollar {
				return source(src, w)
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return source(src, w)
			}
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return source(src, w)
				}
				b.WriteString(unescape(lit.Value, "\\\"$`\n"))
			}
		default:
			return source(src, w)
		}
	}
	return b.String()
}

// unescape resolves backslashes: outside quotes (only == "") a backslash
// keeps the next character and a backslash-newline vanishes; in double
// quotes only before the characters of only.
func unescape(s, only string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (only == "" || strings.IndexByte(only, s[i+1]) >= 0) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func source(src string, n syntax.Node) string {
	from, to := int(n.Pos().Offset()), int(n.End().Offset())
	if from < 0 || to > len(src) || from > to {
		return ""
	}
	return src[from:to]
}

// globMatch matches s against pattern: * any run of characters, ? one; a
// trailing " *" also matches the end of s.
func globMatch(pattern, s string) bool {
	if strings.HasSuffix(pattern, " *") && globMatch(strings.TrimSuffix(pattern, " *"), s) {
		return true
	}
	// Iterative wildcard matching with backtracking to the last *.
	p, t := 0, 0
	star, mark := -1, 0
	for t < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[t]) && pattern[p] != '*':
			p++
			t++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, t
			p++
		case star >= 0:
			p = star + 1
			mark++
			t = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
