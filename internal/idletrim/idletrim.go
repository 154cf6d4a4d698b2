// Package idletrim gives the heap's unused memory back to the system once
// the process goes quiet after work. A gateway is idle most of its life; after
// a burst of turns the Go runtime keeps the heap it grew (garbage until the
// next collection, which an idle process triggers only by the runtime's forced
// collection every two minutes) and returns free pages to the system only at
// the background scavenger's pace. Run watches the allocation rate through
// runtime/metrics and, on the first quiet period after activity, collects and
// returns what is free (debug.FreeOSMemory) — once per transition from busy to
// idle, so the cost is one collection of a small live heap per burst, never a
// periodic one, and nothing while conch is busy.
package idletrim

import (
	"context"
	"log/slog"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Options tune Run; the zero value of a field is its default.
type Options struct {
	// Every is how often Run looks at the allocation counters (10 s).
	Every time.Duration
	// Quiet is the most a period may allocate and still count as idle
	// (256 KiB: an idle conch allocates far less, a turn far more).
	Quiet uint64
	// MinReturn is the least memory worth a collection: the heap's
	// unreleased bytes beyond the live heap (2 MiB).
	MinReturn uint64
	// Release, if set, is called on every busy-to-idle transition before
	// the trim: it drops what is kept in memory only to save work while
	// busy (the store's model views), so the trim returns that too.
	Release func()
	// Program, if set, unmaps the program's pages (ReleaseProgram) when
	// at least the given bytes of them are resident: on every busy-to-idle
	// transition (0: always), and while idle whenever what idle work maps
	// back (a sandbox stopped, a page served) grew past what the first
	// quiet period after the release used by ProgramRegrowth.
	Program func(atLeast uint64) (resident uint64, released bool, err error)
	// ProgramRegrowth is that growth (4 MiB).
	ProgramRegrowth uint64
	// Logger gets one debug line per trim (nil: none).
	Logger *slog.Logger
	// trim replaces debug.FreeOSMemory in tests.
	trim func()
}

const (
	allocsMetric   = "/gc/heap/allocs:bytes"
	objectsMetric  = "/memory/classes/heap/objects:bytes"
	liveMetric     = "/gc/heap/live:bytes"
	freeMetric     = "/memory/classes/heap/free:bytes"
	releasedMetric = "/memory/classes/heap/released:bytes"
)

// Run trims after every busy-to-idle transition until ctx ends.
func Run(ctx context.Context, o Options) {
	if o.Every <= 0 {
		o.Every = 10 * time.Second
	}
	if o.Quiet == 0 {
		o.Quiet = 256 << 10
	}
	if o.MinReturn == 0 {
		o.MinReturn = 2 << 20
	}
	if o.ProgramRegrowth == 0 {
		o.ProgramRegrowth = 4 << 20
	}
	if o.trim == nil {
		o.trim = debug.FreeOSMemory
	}
	t := time.NewTicker(o.Every)
	defer t.Stop()
	tr := newTrimmer(o, newSampler().read)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			tr.step()
		}
	}
}

// trimmer is the state of Run between periods.
type trimmer struct {
	o       Options
	read    func() sample
	last    sample
	trimmed bool
	// progFloor is what of the program idle work keeps resident, measured
	// at the first quiet period after a release (0: not yet).
	progFloor uint64
}

func newTrimmer(o Options, read func() sample) *trimmer {
	// Start is work: the package inits touched pages of the whole program
	// and allocated; the first quiet period gives that back.
	return &trimmer{o: o, read: read, last: read()}
}

// step ends a period: busy if it allocated Quiet or more, else idle; the
// first idle period after a busy one trims when MinReturn is spare.
func (t *trimmer) step() {
	now := t.read()
	if now.allocs-t.last.allocs >= t.o.Quiet {
		t.trimmed = false // busy: trim when it goes quiet
	} else if t.trimmed {
		t.program(false) // idle on: only what idle work mapped back
		now = t.read()   // what that allocated is not the next period's work
	} else {
		t.trimmed = true
		released := false
		if t.o.Release != nil {
			t.o.Release()
			released = true // garbage the counters see only after a collection
		}
		t.program(true)
		if spare := now.spare(); released || spare >= t.o.MinReturn {
			t.o.trim()
			after := t.read()
			if t.o.Logger != nil {
				t.o.Logger.Debug("idle: heap returned to the system", "spare_mib", mib(spare), "released_mib", mib(after.released-now.released), "live_mib", mib(after.live), "caches_released", released)
			}
			now = after
		}
	}
	t.last = now
}

// program releases the program's pages: always after work, and while idle
// once they grew ProgramRegrowth past what the first idle period kept.
func (t *trimmer) program(afterWork bool) {
	if t.o.Program == nil {
		return
	}
	var atLeast uint64
	switch {
	case afterWork:
	case t.progFloor == 0:
		atLeast = math.MaxUint64 // measure what idle work keeps
	default:
		atLeast = t.progFloor + t.o.ProgramRegrowth
	}
	n, released, err := t.o.Program(atLeast)
	switch {
	case err != nil:
		if t.o.Logger != nil {
			t.o.Logger.Warn("idle: the program's pages not released", "err", err)
		}
	case released:
		t.progFloor = 0
		if t.o.Logger != nil {
			t.o.Logger.Debug("idle: program pages released", "resident_mib", mib(n), "after_work", afterWork)
		}
	case t.progFloor == 0:
		t.progFloor = max(n, 1)
	}
}

// sample is what Run reads of the runtime's memory.
type sample struct {
	allocs, objects, live, free, released uint64
}

// spare is the heap memory a collection and a scavenge could give back:
// garbage not yet collected (objects beyond the live heap at the last
// collection) and free spans the scavenger has not returned yet (not the
// unused room inside spans still holding objects: that stays).
func (s sample) spare() uint64 {
	var garbage uint64
	if s.objects > s.live {
		garbage = s.objects - s.live
	}
	return garbage + s.free
}

type sampler struct{ m []metrics.Sample }

func newSampler() *sampler {
	names := []string{allocsMetric, objectsMetric, liveMetric, freeMetric, releasedMetric}
	m := make([]metrics.Sample, len(names))
	for i, n := range names {
		m[i].Name = n
	}
	return &sampler{m: m}
}

func (s *sampler) read() sample {
	metrics.Read(s.m)
	v := func(i int) uint64 {
		if s.m[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s.m[i].Value.Uint64()
	}
	return sample{allocs: v(0), objects: v(1), live: v(2), free: v(3), released: v(4)}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
