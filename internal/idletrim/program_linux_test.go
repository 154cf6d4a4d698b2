package idletrim

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReleaseProgram: the program's code and read-only data that ran are
// resident; released, they are not, and the program runs on (its pages come
// back as it uses them).
func TestReleaseProgram(t *testing.T) {
	resident := func() uint64 {
		exe, err := os.Stat("/proc/self/exe")
		if err != nil {
			t.Fatal(err)
		}
		smaps, err := os.ReadFile("/proc/self/smaps")
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, m := range programMappings(smaps, exe.Sys().(*syscall.Stat_t).Ino, nil) {
			n += m.rss
		}
		return n
	}
	before := resident()
	if before < 1<<20 {
		t.Fatalf("%d bytes of the program resident before: the mappings were not found", before)
	}
	if n, released, err := ReleaseProgram(1 << 50); err != nil || released || n < before/2 {
		t.Fatalf("ReleaseProgram above what is resident: %d resident, released %v, %v", n, released, err)
	}
	released, ok, err := ReleaseProgram(0)
	if err != nil || !ok {
		t.Fatal(err)
	}
	after := resident()
	t.Logf("program resident: %d KiB before, %d KiB reported released, %d KiB after", before>>10, released>>10, after>>10)
	// What the test runs after the release comes back (a fault maps a
	// few neighbouring pages too).
	if released < before/2 || after > before*3/4 {
		t.Fatalf("released %d of %d bytes; %d still resident", released, before, after)
	}
	// Code and data run and read again as before.
	if got := fmt.Sprintf("%x %v", sha256.Sum256([]byte("conch")), strings.ToUpper("ok")); !strings.HasSuffix(got, " OK") {
		t.Fatalf("after the release: %q", got)
	}
}

// programMappings reads the header and the sizes of each mapping of the
// file, and only those.
func TestProgramMappings(t *testing.T) {
	smaps := []byte(`00400000-00c00000 r-xp 00000000 fe:01 42 /usr/bin/conch
Rss:                4096 kB
Anonymous:             0 kB
00c00000-01000000 r--p 00800000 fe:01 42 /usr/bin/conch
Rss:                 100 kB
Anonymous:             8 kB
01000000-01100000 rw-p 00c00000 fe:01 42 /usr/bin/conch
Rss:                 200 kB
Anonymous:           200 kB
7f0000000000-7f0000100000 r-xp 00000000 fe:01 43 /usr/lib/other.so
Rss:                 300 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0 
Rss:                 400 kB
Anonymous:           400 kB
`)
	got := fmt.Sprint(programMappings(smaps, 42, nil))
	want := "[{4194304 12582912 4194304 0} {12582912 16777216 102400 8192}]"
	if got != want {
		t.Fatalf("got %s, want %s (code and read-only data of inode 42 only, with their sizes)", got, want)
	}
}

// BenchmarkReleaseProgram: what the release costs, and what the work after
// it pays to map its pages back (minor faults), against the same work with
// its pages resident, in the same run.
func BenchmarkReleaseProgram(b *testing.B) {
	work := func() {
		var sb strings.Builder
		for i := range 200 {
			fmt.Fprintf(&sb, "%d %x\n", i, sha256.Sum256([]byte(sb.String()[:min(sb.Len(), 64)])))
		}
	}
	var release, warm, cold time.Duration
	for range b.N {
		work()
		t0 := time.Now()
		work()
		warm += time.Since(t0)
		t1 := time.Now()
		if _, _, err := ReleaseProgram(0); err != nil {
			b.Fatal(err)
		}
		release += time.Since(t1)
		t2 := time.Now()
		work()
		cold += time.Since(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(release.Microseconds())/n, "release-us")
	b.ReportMetric(float64(warm.Microseconds())/n, "work-resident-us")
	b.ReportMetric(float64(cold.Microseconds())/n, "work-after-release-us")
	b.ReportMetric(0, "ns/op")
}

var idleSink [][]byte

// TestIdleMeasureIsNotWork: with the real sampler and ReleaseProgram, a
// quiet process that allocates a little in the background (120 KB a period,
// well under Quiet) is trimmed once, after start; looking at its program's
// pages every idle period (which allocates itself) does not count as work
// that would trim again and again.
func TestIdleMeasureIsNotWork(t *testing.T) {
	trims := 0
	tr := newTrimmer(Options{Quiet: 256 << 10, MinReturn: 2 << 20, Program: ReleaseProgram, trim: func() { trims++ }}, newSampler().read)
	for range 24 {
		idleSink = idleSink[:0]
		for range 120 {
			idleSink = append(idleSink, make([]byte, 1024))
		}
		tr.step()
	}
	if trims > 1 {
		t.Fatalf("%d trims over 24 quiet periods, want the one after start", trims)
	}
}

// ReleaseProgram runs every quiet period: once its buffers are grown it
// allocates (almost) nothing, so an idle heap does not grow with garbage.
func TestReleaseProgramAllocatesLittle(t *testing.T) {
	if _, _, err := ReleaseProgram(1 << 62); err != nil { // grows the buffers
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, _, err := ReleaseProgram(1 << 62); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 8 {
		t.Fatalf("%.0f allocations a call, want a handful (the file's open)", allocs)
	}
}
