package tool

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		line     string
		wantArgv []string
		wantEnv  []string
	}{
		{"ls", []string{"ls"}, nil},
		{"  ls   -la\t/workspace  ", []string{"ls", "-la", "/workspace"}, nil},
		{`echo 'a b'  "c d"`, []string{"echo", "a b", "c d"}, nil},
		{`echo a"b"'c'd`, []string{"echo", "abcd"}, nil},
		{`echo '' ""`, []string{"echo", "", ""}, nil},
		{`echo 'it''s'`, []string{"echo", "its"}, nil},
		{`echo "it's"`, []string{"echo", "it's"}, nil},
		{`echo 'say "hi"'`, []string{"echo", `say "hi"`}, nil},
		{`echo a\ b`, []string{"echo", "a b"}, nil},
		{`echo \'x\'`, []string{"echo", "'x'"}, nil},
		{`echo \|`, []string{"echo", "|"}, nil},
		{`echo "a\"b" "c\\d" "e\$f" "g\h"`, []string{"echo", `a"b`, `c\d`, "e$f", `g\h`}, nil},
		{`echo 'a\nb'`, []string{"echo", `a\nb`}, nil},
		{"echo a \\\nb", []string{"echo", "a", "b"}, nil},
		{"echo \"line1\nline2\"", []string{"echo", "line1\nline2"}, nil},
		{"ls\n", []string{"ls"}, nil},
		{`echo 'a|b' "c>d" 'e;f' "$(x)" 'g&&h'`, nil, nil}, // "$(x)" is refused; see the error table
		{`find . -name '*.go'`, []string{"find", ".", "-name", "*.go"}, nil},
		{`grep -r "TODO" .`, []string{"grep", "-r", "TODO", "."}, nil},
		{`python3 -c 'print(1+1)'`, []string{"python3", "-c", "print(1+1)"}, nil},
		{`git log --format=%H -n1`, []string{"git", "log", "--format=%H", "-n1"}, nil},
		{`git diff HEAD~1`, []string{"git", "diff", "HEAD~1"}, nil},
		{`echo 5$ $`, []string{"echo", "5$", "$"}, nil},
		{`echo '$HOME'`, []string{"echo", "$HOME"}, nil},
		{`echo a#b`, []string{"echo", "a#b"}, nil},
		{`ls # list it`, []string{"ls"}, nil},
		{`FOO=1 BAR="x y" make test`, []string{"make", "test"}, []string{"FOO=1", "BAR=x y"}},
		{`make FOO=1`, []string{"make", "FOO=1"}, nil},
		{`"FOO=1" make`, []string{"FOO=1", "make"}, nil},
		{`1X=2 ls`, []string{"1X=2", "ls"}, nil},
		{`echo héllo 世界`, []string{"echo", "héllo", "世界"}, nil},
		// Cases the parser reads as bash does.
		{"echo \"a'b\" 'c\"d' \"\\`\" \"\\\\x\"", []string{"echo", "a'b", `c"d`, "`", `\x`}, nil},
		{`echo a\*b \~ \$HOME \{a,b\}`, []string{"echo", "a*b", "~", "$HOME", "{a,b}"}, nil},
		{`echo '*' "?" '[x]' "{a,b}" '~'`, []string{"echo", "*", "?", "[x]", "{a,b}", "~"}, nil},
		{"echo \"a\\\nb\"", []string{"echo", "ab"}, nil},
		{"ls -l \\\n  -a", []string{"ls", "-l", "-a"}, nil},
		{"ls # a comment with 'quotes' and | pipes", []string{"ls"}, nil},
		{"ls\r\n", []string{"ls"}, nil},
		{`find . -name x -exec rm {} +`, []string{"find", ".", "-name", "x", "-exec", "rm", "{}", "+"}, nil},
		{`echo {a}`, []string{"echo", "{a}"}, nil},
		{`echo a=b`, []string{"echo", "a=b"}, nil},
		{`A= B='' ls`, []string{"ls"}, []string{"A=", "B="}},
		{`time ls -l`, []string{"time", "ls", "-l"}, nil},
		{`time -p make`, []string{"time", "-p", "make"}, nil},
		{`export FOO=1 BAR`, []string{"export", "FOO=1", "BAR"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, err := SplitCommand(tt.line)
			if tt.wantArgv == nil {
				if err == nil {
					t.Fatalf("got %q, want an error", got.Argv)
				}
				return
			}
			if err != nil {
				t.Fatalf("SplitCommand: %v", err)
			}
			if !slices.Equal(got.Argv, tt.wantArgv) {
				t.Errorf("argv: got %q, want %q", got.Argv, tt.wantArgv)
			}
			if !slices.Equal(got.Env, tt.wantEnv) {
				t.Errorf("env: got %q, want %q", got.Env, tt.wantEnv)
			}
		})
	}
}

func TestSplitCommandRefuses(t *testing.T) {
	tests := []struct {
		line      string
		wantKind  ShellErrorKind
		wantToken string
		wantMsg   string
	}{
		{"ls | wc -l", ShellOperator, "|", "a pipe (|)"},
		{"ls|wc", ShellOperator, "|", "a pipe"},
		{"make && make install", ShellOperator, "&&", "&&"},
		{"false || true", ShellOperator, "||", "||"},
		{"cd /tmp; ls", ShellOperator, ";", "; (a command separator)"},
		{"sleep 10 &", ShellOperator, "&", "background"},
		{"echo hi > out.txt", ShellOperator, ">", "a redirect (>)"},
		{"echo hi >> out.txt", ShellOperator, ">>", "a redirect (>>)"},
		{"make 2>&1", ShellOperator, "2>&1", "a redirect (2>&1)"},
		{"ls 2>/dev/null", ShellOperator, "2>", "a redirect (2>)"},
		{"echo x >&2", ShellOperator, ">&2", "redirect"},
		{"wc -l < file", ShellOperator, "<", "a redirect (<)"},
		{"cat <<EOF", ShellOperator, "<<", "redirect"},
		{"(cd x)", ShellOperator, "(", "subshell"},
		{"ls\nrm x", ShellOperator, "\\n", "a line break"},
		{"ls # c\nrm x", ShellOperator, "\\n", "a line break"},
		{"echo `date`", ShellSubstitution, "`", "backtick"},
		{`echo "today: ` + "`date`" + `"`, ShellSubstitution, "`", "backtick"},
		{"echo $(date)", ShellSubstitution, "$(", "$(...)"},
		{`echo "$(date)"`, ShellSubstitution, "$(", "$(...)"},
		{"echo $HOME", ShellExpansion, "$HOME", "$HOME"},
		{`echo "$HOME/x"`, ShellExpansion, "$HOME", "$HOME"},
		{"echo ${PATH}", ShellExpansion, "${PATH}", "${PATH}"},
		{"echo $1", ShellExpansion, "$1", "$1"},
		{"echo $?", ShellExpansion, "$?", "$?"},
		{"echo $'a\\n'", ShellExpansion, "$'", "$'"},
		{"ls *.go", ShellGlob, "*", "glob"},
		{"ls file?.txt", ShellGlob, "?", "glob"},
		{"ls [ab].txt", ShellGlob, "[", "glob"},
		{"ls ~/x", ShellTilde, "~", "home directory"},
		{"echo 'abc", ShellQuote, "'", "unterminated single quote starting at offset 5"},
		{`echo "abc`, ShellQuote, `"`, "unterminated double quote starting at offset 5"},
		{`echo abc\`, ShellQuote, `\`, "backslash"},
		{"echo a\x00b", ShellBadInput, "\\0", "NUL byte at offset 6"},
		{"echo \"a\x00b\"", ShellBadInput, "\\0", "NUL byte"},
		{"", ShellBadInput, "", "empty"},
		{"   \t ", ShellBadInput, "", "empty"},
		{"# only a comment", ShellBadInput, "", "empty"},
		{"FOO=1", ShellBadInput, "", "only sets variables"},
		// Cases the parser reads as bash does.
		{"cat <<EOF\nhello\nEOF\n", ShellOperator, "<<", "a here-document"},
		{"cat <<-EOF\n\thello\n\tEOF", ShellOperator, "<<-", "a here-document"},
		{"cat <<< 'hi'", ShellOperator, "<<<", "a here-string"},
		{"ls &> log", ShellOperator, "&>", "a redirect (&>)"},
		{"ls |& cat", ShellOperator, "|&", "a pipe (|&)"},
		{"ls;", ShellOperator, ";", "; (a command separator)"},
		{"! ls", ShellOperator, "!", "negate"},
		{"diff <(ls a) <(ls b)", ShellSubstitution, "<(", "process substitution"},
		{"echo $((1+2))", ShellExpansion, "$((", "arithmetic"},
		{`echo $"hi"`, ShellExpansion, `$"`, "translated"},
		{"echo ${#PATH}", ShellExpansion, "${#PATH}", "${#PATH}"},
		{"echo x$HOME", ShellExpansion, "$HOME", "$HOME"},
		{"echo {a,b}", ShellGlob, "{a,b}", "brace expansion"},
		{"echo file{1..3}", ShellGlob, "file{1..3}", "brace expansion"},
		{"ls @(a|b)", ShellGlob, "@(", "extended glob"},
		{"FOO=~/x ls", ShellTilde, "~", "home directory"},
		{"FOO+=x ls", ShellExpansion, "FOO+=", "appending"},
		{"A=(1 2)", ShellOperator, "(", "array assignment"},
		{"echo '0\x80'", ShellBadInput, "\x80", "not valid UTF-8 at offset 7"},
		{"echo '0\u0080'", ShellBadInput, "\u0080", "U+0080 at offset 7"},
		{"echo 0\u0081 x", ShellBadInput, "\u0081", "U+0081 at offset 6"},
		{"A=(1 2) ls", ShellBadInput, "", "cannot be read as one shell command"},
		{"if true; then ls; fi", ShellOperator, "if", "the shell keyword if"},
		{"for f in a b; do ls; done", ShellOperator, "for", "a shell loop"},
		{"while true; do ls; done", ShellOperator, "while", "a shell loop"},
		{"{ ls; }", ShellOperator, "{", "a { } group"},
		{"[[ -f x ]]", ShellOperator, "[[", "[[ ]] test"},
		{"(( x++ ))", ShellOperator, "((", "shell arithmetic"},
		{"let x=1", ShellOperator, "let", "the shell builtin let"},
		{"f() { ls; }", ShellOperator, "f", "a function definition"},
		{"echo \"a `b\"", ShellQuote, `"`, "unterminated double quote"},
		{"echo `date", ShellSubstitution, "`", "backtick"},
		{"echo $(date", ShellSubstitution, "$(", "$(...)"},
		{"ls |", ShellOperator, "|", "a pipe (|)"},
		{"echo $HOME | wc", ShellExpansion, "$HOME", "$HOME"}, // the first problem in the line
		{"ls | wc $HOME", ShellOperator, "|", "a pipe"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, err := SplitCommand(tt.line)
			var se *ShellError
			if !errors.As(err, &se) {
				t.Fatalf("got %q, %v; want a *ShellError", got.Argv, err)
			}
			if se.Kind != tt.wantKind {
				t.Errorf("kind: got %d, want %d (%s)", se.Kind, tt.wantKind, se.Msg)
			}
			if se.Token != tt.wantToken {
				t.Errorf("token: got %q, want %q", se.Token, tt.wantToken)
			}
			if !strings.Contains(se.Msg, tt.wantMsg) {
				t.Errorf("message: got %q, want it to contain %q", se.Msg, tt.wantMsg)
			}
		})
	}
}

// FuzzSplitCommand checks the splitter and its checker (SplitCommand runs
// both): they never panic, a refusal is a *ShellError pointing into the
// line, and every word of an accepted line comes back intact when
// re-quoted.
func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{
		`echo 'a b' "c\"d" e\ f`, "ls | wc", `FOO=1 x`, "\x00", `"`, `\`,
		"echo $(id) `id` ${HOME} $1 $((1+2)) $'x' <(ls)", "ls *.go [ab] {a,b} ~/x ~", "a && b || c; d & e\nf",
		"if true; then x; fi", "cat <<EOF\nx\nEOF", "x > f 2>&1 < g", "export A=1", "time ls", "A=1 B=2",
		"echo \"$x\" '$x' \\$x", "ls # comment", "a\\\nb", "\u0080", "\xff", "(ls)", "[[ a ]]", "echo @(a|b)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		cmd, err := SplitCommand(line)
		if err != nil {
			var se *ShellError
			if !errors.As(err, &se) {
				t.Fatalf("SplitCommand(%q): %v is not a *ShellError", line, err)
			}
			if se.Kind < ShellOperator || se.Kind > ShellBadInput || se.Msg == "" {
				t.Fatalf("SplitCommand(%q): error %+v has no kind or message", line, se)
			}
			if se.Pos < 0 || se.Pos > len(line) {
				t.Fatalf("SplitCommand(%q): error position %d outside the line", line, se.Pos)
			}
			return
		}
		if len(cmd.Argv) == 0 {
			t.Fatalf("SplitCommand(%q) accepted a line with no program", line)
		}
		for _, e := range cmd.Env {
			if name, _, ok := strings.Cut(e, "="); !ok || name == "" {
				t.Fatalf("SplitCommand(%q): env entry %q is not NAME=value", line, e)
			}
		}
		var quoted []string
		for _, w := range append(slices.Clone(cmd.Env), cmd.Argv...) {
			quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		again, err := SplitCommand(strings.Join(quoted, " "))
		if err != nil {
			t.Fatalf("re-split of %q: %v", quoted, err)
		}
		if got, want := append(again.Env, again.Argv...), append(cmd.Env, cmd.Argv...); !slices.Equal(got, want) {
			t.Fatalf("re-split: got %q, want %q", got, want)
		}
	})
}
