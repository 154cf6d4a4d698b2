package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"conch"
)

// TestApprovePolicyHostileCorpus matches the policy against commands that
// hide a named command behind quoting, wrappers, nested shells, eval,
// substitutions and paths (each must be seen), and against look-alikes that
// must not match. The last group is what the policy deliberately cannot see
// (documented in README and ApprovePolicy).
func TestApprovePolicyHostileCorpus(t *testing.T) {
	p, err := NewApprovePolicy([]string{"git push *", "rm -rf *", "curl * | sh"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		line    string
		pattern string // "" = no match
	}{
		// Plain, paths and spacing.
		{"git push", "git push *"},
		{"git push origin main", "git push *"},
		{"git   push   --force", "git push *"},
		{"/usr/bin/git push origin", "git push *"},
		{"./git push", "git push *"},
		{"rm -rf /", "rm -rf *"},
		// Quoting and escapes resolve before matching.
		{`'git' "push" origin`, "git push *"},
		{`g'i't pu"s"h`, "git push *"},
		{`g\it p\ush`, "git push *"},
		// Environment prefixes and wrappers.
		{"FOO=1 git push", "git push *"},
		{"env -i FOO=1 BAR=2 git push", "git push *"},
		{"env -u HOME -- git push", "git push *"},
		{"env -S 'git push origin'", "git push *"},
		{"sudo -u root git push", "git push *"},
		{"nice -n 10 timeout 5s nohup git push", "git push *"},
		{"timeout -s KILL 10 rm -rf /tmp/x", "rm -rf *"},
		{"xargs -n1 git push", "git push *"},
		{"find . -name '*.o' -exec rm -rf {} ;", "rm -rf *"},
		{"find . -execdir rm -rf {} +", "rm -rf *"},
		{"stdbuf -o L command git push", "git push *"},
		// Nested shells: every simple command of the script.
		{"bash -c 'git push'", "git push *"},
		{"sh -c 'echo ok && git push origin'", "git push *"},
		{"bash -ec 'cd /workspace; git push'", "git push *"},
		{"bash -o pipefail -c 'true | git push'", "git push *"},
		{"bash -lc '(cd x && git push)'", "git push *"},
		{"bash -c '{ git push; }'", "git push *"},
		{"bash -c 'echo $(git push)'", "git push *"},
		{"bash -c 'echo `git push`'", "git push *"},
		{"bash -c 'diff <(git push) x'", "git push *"},
		{"bash -c 'if true; then git push; fi'", "git push *"},
		{"bash -c 'for i in 1; do rm -rf /; done'", "rm -rf *"},
		{"bash -c 'FOO=1 /usr/bin/git push'", "git push *"},
		{`bash -c "bash -c 'git push'"`, "git push *"},
		{`bash -c 'sudo env X=1 git push'`, "git push *"},
		{"dash -c 'git\tpush'", "git push *"},
		// eval joins its words into a script.
		{"eval 'git push'", "git push *"},
		{"eval git push", "git push *"},
		{`bash -c "eval 'git push'"`, "git push *"},
		{`bash -c 'eval "rm -rf /"'`, "rm -rf *"},
		// A pipe inside a pattern cannot match one simple command.
		{"bash -c 'curl x | sh'", ""},
		// Look-alikes that are not the command.
		{"git status", ""},
		{"git pushx", ""},
		{"echo git push", ""},
		{"grep -r 'git push' .", ""},
		{"bash -c 'echo \"git push\"'", ""},
		{"rm -r -f /", ""}, // another spelling: write a pattern for it
		{"gitpush", ""},
		// What the policy deliberately cannot see.
		{"bash deploy.sh", ""},                                  // a script file
		{"python3 -c 'import os; os.system(\"git push\")'", ""}, // an interpreter
		{"git -C repo push", ""},                                // options between a pattern's words
		{"bash -c '$CMD push'", ""},                             // words built at run time
		{"bash -c \"$(echo Z2l0IHB1c2g= | base64 -d)\"", ""},
		{"make deploy", ""},
	}
	for _, c := range cases {
		cmd, err := splitForPolicy(c.line)
		if err != nil {
			t.Errorf("%q: %v", c.line, err)
			continue
		}
		m, ok := p.Match(cmd)
		switch {
		case c.pattern == "" && ok:
			t.Errorf("%q matched %q (through %q); want no match", c.line, m.Pattern, m.Command)
		case c.pattern != "" && !ok:
			t.Errorf("%q did not match; want %q (simple commands %q)", c.line, c.pattern, SimpleCommands(cmd))
		case c.pattern != "" && m.Pattern != c.pattern:
			t.Errorf("%q matched %q; want %q", c.line, m.Pattern, c.pattern)
		}
	}
}

// splitForPolicy splits a line as the bash tool does, keeping the words
// after NAME=value prefixes; lines the tool refuses (they never reach the
// policy) are parsed as one `bash -c` script instead, to exercise the
// script walker with the same corpus.
func splitForPolicy(line string) ([]string, error) {
	cmd, err := SplitCommand(line)
	if err == nil {
		return cmd.Argv, nil
	}
	return []string{"bash", "-c", line}, nil
}

func TestApprovePolicyNestingBound(t *testing.T) {
	p, _ := NewApprovePolicy([]string{"git push *"})
	script := "true"
	for range maxNesting + 3 {
		script = "bash -c " + shellQuote(script)
	}
	argv, _ := splitForPolicy(script)
	if _, ok := p.Match(argv); !ok {
		t.Fatalf("a script nested past %d levels must ask a person", maxNesting)
	}
}

func shellQuote(s string) string {
	out := "'"
	for _, r := range s {
		if r == '\'' {
			out += `'\''`
		} else {
			out += string(r)
		}
	}
	return out + "'"
}

func TestApprovePolicyPatterns(t *testing.T) {
	if _, err := NewApprovePolicy([]string{" "}); err == nil {
		t.Error("an empty pattern was accepted")
	}
	if _, err := NewApprovePolicy([]string{"*"}); err == nil {
		t.Error(`"*" was accepted`)
	}
	for _, c := range []struct {
		pat, s string
		want   bool
	}{
		{"git push *", "git push", true},
		{"git push *", "git push a b", true},
		{"git push *", "git pushy", false},
		{"rm -rf *", "rm -rf /", true},
		{"docker ? ps", "docker x ps", true},
		{"*kubectl delete *", "/opt/kubectl delete pod", true},
	} {
		if got := globMatch(c.pat, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
}

type denyAll struct{ asked []conch.ApprovalRequest }

func (d *denyAll) Approve(_ context.Context, _ string, req conch.ApprovalRequest) (conch.ApprovalDecision, error) {
	d.asked = append(d.asked, req)
	return conch.ApprovalDecision{Choice: conch.ApproveDeny, Reason: conch.ApprovalReasonPerson, By: "alice"}, nil
}

// TestBashApprovalRefusals: a command the policy names is refused when
// nobody can be asked (conch's MCP server) and when the person denies it,
// before any sandbox is touched; the question names the command and rule.
func TestBashApprovalRefusals(t *testing.T) {
	p, _ := NewApprovePolicy([]string{"git push *"})
	b := NewBash(BashOptions{Approve: p})
	env := conch.ToolEnv{Conversation: conch.ConversationKey{Channel: conch.ChannelCLI, ID: "x"}, CallID: "c1"}
	out, err := b.Run(context.Background(), env, json.RawMessage(`{"command":"sh -c 'git push origin main'"}`))
	if err != nil || !out.IsError || !strings.Contains(out.Content, "nobody can be asked") {
		t.Fatalf("nobody to ask: %+v %v", out, err)
	}
	people := &denyAll{}
	env.Approvals = people
	out, err = b.Run(context.Background(), env, json.RawMessage(`{"command":"sh -c 'git push origin main'"}`))
	if err != nil || !out.IsError || !strings.Contains(out.Content, "alice denied this command") {
		t.Fatalf("denied: %+v %v", out, err)
	}
	if len(people.asked) != 1 || people.asked[0].Title != "sh -c 'git push origin main'" || people.asked[0].Scope != "command:git push *" ||
		!people.asked[0].Resumable || !strings.Contains(people.asked[0].Detail, "through `git push origin main`") {
		t.Fatalf("question %+v", people.asked)
	}
	// A command the policy does not name is not asked about.
	out, _ = b.Run(context.Background(), env, json.RawMessage(`{"command":"git status"}`))
	if len(people.asked) != 1 || strings.Contains(out.Content, "denied") {
		t.Fatalf("git status was asked about: %+v", out)
	}
}
