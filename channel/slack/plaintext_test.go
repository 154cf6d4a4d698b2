package slack

import "testing"

func TestPlainTextOfSlackMessages(t *testing.T) {
	c := &Channel{me: "U0BOT"}
	for _, tc := range []struct{ in, want string }{
		{"<@U0BOT> hi <@U0BOB>", "hi <@U0BOB>"},
		{"<@U0BOT>: !Reset now", "/reset now"},
		{"!stopper", "!stopper"},
		{"see <mailto:a@b.c|a@b.c> and <https://x.y>", "see a@b.c and https://x.y"},
		{"1 &lt; 2", "1 < 2"},
	} {
		if got := c.plainText(tc.in); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}
