package conch_test

import (
	"errors"
	"strings"
	"testing"

	"conch"
)

func TestFreshness(t *testing.T) {
	for _, tc := range []struct {
		image, profile bool
		want           string
	}{
		{true, true, "current"},
		{false, true, "stale image"},
		{true, false, "stale profile"},
		{false, false, "stale image+profile"},
	} {
		s := conch.SandboxInfo{ImageCurrent: tc.image, ProfileCurrent: tc.profile}
		if got := s.Freshness(); got != tc.want {
			t.Errorf("image %v profile %v: got %q, want %q", tc.image, tc.profile, got, tc.want)
		}
	}
}

func TestRefErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		err  conch.SandboxRefError
		want []string
	}{
		{conch.SandboxRefError{Ref: "x", Instance: "i1"}, []string{`matches "x"`, "instance i1", "container name", "id prefix", "channel:id"}},
		{conch.SandboxRefError{Ref: "ab", Matches: []string{"n1", "n2"}}, []string{`"ab" is ambiguous`, "n1, n2"}},
	} {
		got := tc.err.Error()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("got %q, want %q in it", got, w)
			}
		}
	}
}

func TestAtPIDsLimit(t *testing.T) {
	for _, tc := range []struct {
		pids, limit int64
		want        bool
	}{{9, 128, false}, {124, 128, false}, {125, 128, true}, {128, 128, true}, {500, 0, false}} {
		if got := (conch.SandboxStats{PIDs: tc.pids, PIDsLimit: tc.limit}).AtPIDsLimit(); got != tc.want {
			t.Errorf("%d of %d: got %v, want %v", tc.pids, tc.limit, got, tc.want)
		}
	}
}

func TestNoSandboxError(t *testing.T) {
	key := conch.ConversationKey{Channel: "matrix", ID: "!a:example.org"}
	for _, tc := range []struct {
		err  *conch.NoSandboxError
		want string
	}{
		{&conch.NoSandboxError{Key: key}, "conversation matrix:!a:example.org has no container now; one is created on its next use"},
		{&conch.NoSandboxError{Key: key, Workspaces: []string{"v1", "v2"}},
			"conversation matrix:!a:example.org has no container now (its workspace v1, v2 is kept); one is created on its next use"},
	} {
		var err error = tc.err
		var got *conch.NoSandboxError
		if err.Error() != tc.want || conch.KindOf(err) != conch.KindNotFound || conch.UserMessage(err) != tc.want || !errors.As(err, &got) {
			t.Errorf("got %q kind %s user %q, want %q, not found", err, conch.KindOf(err), conch.UserMessage(err), tc.want)
		}
	}
}
