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

// FuzzSplitCommand checks the splitter never panics and that every word of
// an accepted line comes back intact when re-quoted.
func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{`echo 'a b' "c\"d" e\ f`, "ls | wc", `FOO=1 x`, "\x00", `"`, `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		cmd, err := SplitCommand(line)
		if err != nil {
			return
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
