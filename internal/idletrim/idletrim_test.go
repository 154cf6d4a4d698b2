package idletrim

import (
	"context"
	"runtime/debug"
	"testing"
	"time"
)

var sink []byte

// busy allocates garbage for d, as a turn does.
func busy(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		sink = make([]byte, 64<<10)
	}
}

// TestTrimsOncePerQuietPeriod: no trim before any work, one trim when work
// stops, none while idle goes on, one again after the next burst.
func TestTrimsOncePerQuietPeriod(t *testing.T) {
	trims := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Options{Every: 20 * time.Millisecond, Quiet: 32 << 10, MinReturn: 1, trim: func() { trims <- struct{}{} }})
	}()
	defer func() { cancel(); <-done }()
	expect := func(n int, within time.Duration) {
		t.Helper()
		got := 0
		deadline := time.After(within)
		for {
			select {
			case <-trims:
				got++
				continue
			case <-deadline:
			}
			break
		}
		if got != n {
			t.Fatalf("%d trims, want %d", got, n)
		}
	}
	expect(0, 150*time.Millisecond) // idle from the start: nothing to give back
	for range 2 {
		busy(150 * time.Millisecond)
		expect(1, 500*time.Millisecond) // the quiet period after the burst
		expect(0, 200*time.Millisecond) // still idle: no second trim
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
