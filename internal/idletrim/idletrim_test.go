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
		Program: func(uint64) (uint64, bool, error) { calls = append(calls, "program"); return 0, true, nil },
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
		{10, "[release program trim release program trim program]", "still quiet: only the program's pages looked at"},
	}
	for _, st := range steps {
		if got := period(st.alloc); got != st.want {
			t.Fatalf("%s: calls %s, want %s", st.what, got, st.want)
		}
	}
}

// TestProgramReleasedAgainWhenIdleWorkGrowsIt: after work the program's
// pages are released; the first quiet period after measures what idle work
// keeps resident; later quiet periods release again only once that grew by
// ProgramRegrowth (a sandbox stopped, a page served), never while busy.
func TestProgramReleasedAgainWhenIdleWorkGrowsIt(t *testing.T) {
	var cur sample
	resident := uint64(40 << 20)
	var asked []uint64
	releases := 0
	tr := newTrimmer(Options{Quiet: 100, MinReturn: 1 << 40, ProgramRegrowth: 4 << 20, trim: func() {},
		Program: func(atLeast uint64) (uint64, bool, error) {
			asked = append(asked, atLeast)
			n := resident
			if n < atLeast {
				return n, false, nil
			}
			releases++
			resident = 1 << 20 // what the release leaves
			return n, true, nil
		}}, func() sample { return cur })
	period := func(alloc uint64, grow uint64) {
		cur.allocs += alloc
		resident += grow
		tr.step()
	}
	period(0, 0) // quiet after start: released
	if releases != 1 || asked[0] != 0 {
		t.Fatalf("after start: %d releases, asked %v", releases, asked)
	}
	period(0, 2<<20) // first idle period: measured (3 MiB), not released
	period(0, 2<<20) // 5 MiB: less than 3 + 4
	if releases != 1 {
		t.Fatalf("released again below the regrowth: asked %v", asked)
	}
	period(0, 3<<20) // 8 MiB >= 7: released
	if releases != 2 {
		t.Fatalf("not released after idle work grew the program by 5 MiB: asked %v", asked)
	}
	period(1<<20, 30<<20) // busy: nothing
	if releases != 2 {
		t.Fatalf("released while busy")
	}
	period(0, 0) // quiet after work: released whatever is resident
	if releases != 3 {
		t.Fatalf("not released after work: asked %v", asked)
	}
}
