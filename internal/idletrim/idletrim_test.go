package idletrim

import (
	"fmt"
	"runtime/debug"
	"testing"
)

var sink []byte

// TestTrimsOncePerQuietPeriod: no trim before any work, one trim on the
// first quiet period after work, none while idle goes on, one again after the
// next burst, none when too little is spare.
func TestTrimsOncePerQuietPeriod(t *testing.T) {
	var cur sample
	trims := 0
	tr := newTrimmer(Options{Quiet: 100, MinReturn: 1000, trim: func() { trims++; cur.free = 0 }}, func() sample { return cur })
	// period is one period of Run: alloc bytes allocated in it, spare
	// bytes free at its end; it returns the trims so far.
	period := func(alloc, spare uint64) int {
		cur.allocs += alloc
		cur.free = spare
		tr.step()
		return trims
	}
	steps := []struct {
		alloc, spare uint64
		want         int
		what         string
	}{
		{0, 5000, 1, "quiet after start (work): trim"},
		{0, 5000, 1, "still quiet: no second trim"},
		{1 << 20, 5000, 1, "busy"},
		{10, 5000, 2, "quiet after work: trim"},
		{10, 5000, 2, "still quiet: no second trim"},
		{1 << 20, 5000, 2, "busy again"},
		{0, 5000, 3, "quiet again: trim"},
		{1 << 20, 10, 3, "busy, little garbage"},
		{0, 10, 3, "quiet, but less spare than MinReturn: no trim"},
	}
	for _, st := range steps {
		if got := period(st.alloc, st.spare); got != st.want {
			t.Fatalf("%s: %d trims, want %d", st.what, got, st.want)
		}
	}
}

// TestSpareIsReturned: after a burst the sampler counts the garbage as
// spare, and the real trim (debug.FreeOSMemory) returns it to the system.
func TestSpareIsReturned(t *testing.T) {
	s := newSampler()
	for range 512 {
		sink = make([]byte, 32<<10) // 16 MiB of garbage
	}
	sink = nil
	before := s.read()
	if before.spare() < 1<<20 {
		t.Fatalf("spare %d bytes after 16 MiB of garbage", before.spare())
	}
	debug.FreeOSMemory()
	after := s.read()
	if after.released <= before.released {
		t.Errorf("released %d bytes before the trim, %d after", before.released, after.released)
	}
	if after.spare() >= before.spare() {
		t.Errorf("spare %d bytes before the trim, %d after", before.spare(), after.spare())
	}
}

// TestReleaseBeforeTrim: Release runs once per busy-to-idle transition,
// before the trim, and the trim follows it even when the counters show
// little spare (what Release dropped is garbage only a collection sees).
func TestReleaseBeforeTrim(t *testing.T) {
	var cur sample
	var calls []string
	tr := newTrimmer(Options{Quiet: 100, MinReturn: 1000,
		Release: func() { calls = append(calls, "release") },
		Program: func() (uint64, error) { calls = append(calls, "program"); return 0, nil },
		trim:    func() { calls = append(calls, "trim") }}, func() sample { return cur })
	period := func(alloc uint64) string {
		cur.allocs += alloc
		cur.free = 10 // less than MinReturn
		tr.step()
		return fmt.Sprint(calls)
	}
	steps := []struct {
		alloc uint64
		want  string
		what  string
	}{
		{0, "[release program trim]", "quiet after start (work): release, the program's pages, then trim"},
		{1 << 20, "[release program trim]", "busy"},
		{10, "[release program trim release program trim]", "quiet after work"},
		{10, "[release program trim release program trim]", "still quiet: nothing more"},
	}
	for _, st := range steps {
		if got := period(st.alloc); got != st.want {
			t.Fatalf("%s: calls %s, want %s", st.what, got, st.want)
		}
	}
}
