package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"

	"conch"
)

// sqliteMem is SQLite's own account of the memory its open connections
// hold (sqlite3_db_status, summed over the writer and every open reader).
type sqliteMem struct {
	conns                         int
	cache, schema, stmt, lookside int64 // bytes
}

func (m sqliteMem) total() int64 { return m.cache + m.schema + m.stmt + m.lookside }

// connMemory reads SQLite's counters of every open connection of the
// store. The load must be paused: it takes each connection in turn.
func connMemory(ctx context.Context, tb testing.TB, d *DB) (writer, readers sqliteMem) {
	tb.Helper()
	var m sqliteMem
	read := func(c *sql.Conn) {
		err := c.Raw(func(dc any) error {
			st, ok := dc.(sqlite.DBStatus)
			if !ok {
				return fmt.Errorf("%T is not a sqlite.DBStatus", dc)
			}
			for _, x := range []struct {
				op  sqlite.DBStatusOp
				dst *int64
			}{{sqlite.DBStatusCacheUsed, &m.cache}, {sqlite.DBStatusSchemaUsed, &m.schema}, {sqlite.DBStatusStmtUsed, &m.stmt}, {sqlite.DBStatusLookasideUsed, &m.lookside}} {
				cur, _, err := st.Status(x.op, false)
				if err != nil {
					return err
				}
				*x.dst += int64(cur)
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
		m.conns++
	}
	pools := []*sql.DB{d.w}
	if d.r != d.w {
		pools = append(pools, d.r)
	}
	var got []sqliteMem
	for _, p := range pools {
		m = sqliteMem{}
		// Holding as many connections as are open takes every idle one
		// (the pool hands out idle connections before it opens any).
		n := p.Stats().OpenConnections
		var held []*sql.Conn
		for range n {
			c, err := p.Conn(ctx)
			if err != nil {
				tb.Fatal(err)
			}
			held = append(held, c)
			read(c)
		}
		for _, c := range held {
			c.Close()
		}
		got = append(got, m)
	}
	if len(got) == 1 {
		return got[0], sqliteMem{}
	}
	return got[0], got[1]
}

// procMemory is this process's anonymous resident memory and the part of
// it Go's runtime accounts for (everything it mapped, less what it gave
// back); the rest is memory Go did not allocate: modernc's libc allocator,
// which SQLite's allocations come from.
type procMemory struct{ anon, goRes int64 }

func (p procMemory) nonGo() int64 { return p.anon - p.goRes }

func readProcMemory(tb testing.TB) procMemory {
	tb.Helper()
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	var p procMemory
	for _, l := range strings.Split(string(st), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssAnon:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			p.anon = kb << 10
		}
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	p.goRes = int64(s[0].Value.Uint64() - s[1].Value.Uint64())
	return p
}

// soakLoad writes the soak's pattern into the store: turns of convs
// conversations, each message a turn of AddInbound, StartTurn,
// ModelHistory, three kept events, the answer and FinishTurn, workers
// conversations at a time, with readers reading histories and events
// concurrently (the web chat, /status, transcripts).
type soakLoad struct {
	d        *DB
	convs    int
	workers  int
	seq      []int64 // per conversation, its last event Seq
	next     []int   // per conversation, its next message
	mu       sync.Mutex
	readErrs []error
}

func newSoakLoad(d *DB, convs, workers int) *soakLoad {
	return &soakLoad{d: d, convs: convs, workers: workers, seq: make([]int64, convs), next: make([]int, convs)}
}

func soakKey(c int) conch.ConversationKey {
	return conch.ConversationKey{Channel: "telegram", ID: fmt.Sprint(700000 + c)}
}

// run sends perConv more messages to every conversation.
func (l *soakLoad) run(ctx context.Context, tb testing.TB, perConv int) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, l.workers)
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	for r := range 2 {
		rwg.Go(func() {
			for i := r; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := soakKey(i * 7 % l.convs)
				if _, err := l.d.History(ctx, key); err != nil {
					l.mu.Lock()
					l.readErrs = append(l.readErrs, err)
					l.mu.Unlock()
				}
				if _, err := l.d.EventsSince(ctx, key, 0, 256); err != nil {
					l.mu.Lock()
					l.readErrs = append(l.readErrs, err)
					l.mu.Unlock()
				}
			}
		})
	}
	for w := range l.workers {
		wg.Go(func() {
			for c := w; c < l.convs; c += l.workers {
				for range perConv {
					if err := l.turn(ctx, c); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	if len(l.readErrs) > 0 {
		tb.Fatal(l.readErrs[0])
	}
}

func (l *soakLoad) turn(ctx context.Context, c int) error {
	key := soakKey(c)
	m := l.next[c]
	l.next[c]++
	text := fmt.Sprintf("soak c%d m%d chat: a message of about the length people write to a bot", c, m)
	tr, _, err := l.d.AddInbound(ctx, conch.Inbound{Key: key, Sender: conch.UserID(fmt.Sprint(700000 + c)), SenderName: "P", Text: text, ExternalID: fmt.Sprintf("%d:%d", c, m)})
	if err != nil {
		return err
	}
	event := func(data conch.EventData) error {
		l.seq[c]++
		return l.d.AppendEvent(ctx, conch.Event{Key: key, Turn: tr.ID, Seq: l.seq[c], Data: data})
	}
	if err := event(conch.MessageEvent{Role: conch.RoleUser, Text: text}); err != nil {
		return err
	}
	if _, err := l.d.StartTurn(ctx, tr.ID); err != nil {
		return err
	}
	if err := event(conch.TurnState{Status: conch.TurnRunning}); err != nil {
		return err
	}
	if _, err := l.d.ModelHistory(ctx, key, tr.ID); err != nil {
		return err
	}
	answer := fmt.Sprintf("ok c%d m%d", c, m)
	if err := l.d.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: answer}); err != nil {
		return err
	}
	if err := event(conch.MessageEvent{Role: conch.RoleAssistant, Text: answer}); err != nil {
		return err
	}
	return l.d.FinishTurn(ctx, tr.ID, conch.TurnDone, "")
}

// BenchmarkStoreMemory writes the soak's pattern (100 conversations, 40
// messages each a quarter, four quarters; SyncNormal: the fsyncs change
// nothing in memory and take most of the time) into a file store and
// reads, at the end of each quarter, SQLite's own counters of every open
// connection (page cache, schema, statements, lookaside) and the memory of
// the process outside Go's runtime. Reported: sqlite-MiB (SQLite's counters
// at the end), sqlite-growth-MiB and nongo-growth-MiB (end against the
// first quarter, as the soak's growth after warm-up), nongo-MiB.
func BenchmarkStoreMemory(b *testing.B) {
	const convs, quarters = 100, 4
	perQuarter := 40
	if testing.Short() {
		perQuarter = 10
	}
	for range b.N {
		ctx := context.Background()
		d, err := Open(ctx, b.TempDir()+"/conch.db", WithSync(SyncNormal))
		if err != nil {
			b.Fatal(err)
		}
		l := newSoakLoad(d, convs, 2*runtime.GOMAXPROCS(0))
		var rows []string
		var first, last int64
		var firstP, lastP procMemory
		for q := range quarters {
			l.run(ctx, b, perQuarter)
			runtime.GC()
			w, r := connMemory(ctx, b, d)
			p := readProcMemory(b)
			var before procMemory
			if q == quarters-1 {
				debug.FreeOSMemory()
				before = readProcMemory(b)
			}
			// It empties the views: the next quarter's first turns read
			// them whole and keep them again.
			hc, hcText := historyCacheHeap(d)
			if q == quarters-1 {
				// What going idle gives back (ReleaseMemory): the model views
				// (above), then SQLite's writer's page cache (PRAGMA
				// shrink_memory), freed into modernc's allocator.
				debug.FreeOSMemory()
				views := readProcMemory(b)
				if err := d.ReleaseMemory(ctx); err != nil {
					b.Fatal(err)
				}
				debug.FreeOSMemory()
				w, _ := connMemory(ctx, b, d)
				shrunk := readProcMemory(b)
				b.Logf("idle: anon %.2f MiB; the views and a trim: %.2f MiB less (Go %.2f); shrink_memory on the writer (cache %.2f MiB left): %.2f MiB less (outside Go %.2f)",
					mib(before.anon), mib(before.anon-views.anon), mib(before.goRes-views.goRes), mib(w.cache), mib(views.anon-shrunk.anon), mib(views.nonGo()-shrunk.nonGo()))
				b.ReportMetric(mib(before.anon-views.anon), "release-MiB")
			}
			if q == 0 {
				first, firstP = w.total()+r.total(), p
			}
			last, lastP = w.total()+r.total(), p
			rows = append(rows, fmt.Sprintf("%6d %8.2f %7d %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f",
				(q+1)*perQuarter*convs, mib(w.cache), r.conns, mib(r.cache), mib(w.schema+w.stmt+r.schema+r.stmt), mib(w.lookside+r.lookside), mib(p.anon), mib(p.goRes), mib(p.nonGo()), mib(hc), mib(hcText)))
		}
		// Reads while nothing is written (a dashboard, transcripts): a
		// reader's cache is no longer emptied by writes and keeps what it
		// read, up to its cache_size.
		var rg sync.WaitGroup
		for g := range 4 {
			rg.Go(func() {
				for c := g; c < convs; c += 4 {
					if _, err := d.History(ctx, soakKey(c)); err != nil {
						b.Error(err)
					}
					if _, err := d.EventsSince(ctx, soakKey(c), 0, 1000); err != nil {
						b.Error(err)
					}
				}
			})
		}
		rg.Wait()
		runtime.GC()
		idleW, idleR := connMemory(ctx, b, d)
		idleP := readProcMemory(b)
		b.Logf("reads without writes: %d readers' caches %.2f MiB (writer %.2f), outside Go %.2f MiB", idleR.conns, mib(idleR.cache), mib(idleW.cache), mib(idleP.nonGo()))
		b.ReportMetric(mib(idleR.cache), "readers-cache-MiB")
		b.Logf("SQLite's counters and the process's anonymous memory (MiB) after each quarter:\n%6s %8s %7s %8s %8s %8s %8s %8s %8s %8s %8s\n%s",
			"msgs", "w cache", "readers", "r cache", "sch+stmt", "lookasd", "anon", "go", "non-go", "hc heap", "hc est", strings.Join(rows, "\n"))
		d.Close()
		b.ReportMetric(mib(last), "sqlite-MiB")
		b.ReportMetric(mib(last-first), "sqlite-growth-MiB")
		b.ReportMetric(mib(lastP.nonGo()), "nongo-MiB")
		b.ReportMetric(mib(lastP.nonGo()-firstP.nonGo()), "nongo-growth-MiB")
	}
}

// historyCacheHeap is the Go heap the model views kept by the store hold
// (the live heap with and without them) and what the cache counts of them.
// It empties the cache (as ReleaseMemory does).
func historyCacheHeap(d *DB) (heap, counted int64) {
	live := func() int64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	counted = int64(d.history.bytes)
	with := live()
	d.history.clear() // ReleaseMemory's first half
	return with - live(), counted
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// BenchmarkHistoryAcross reads the histories of 100 conversations of 40
// turns in turn, from parallel goroutines, while nothing is written (a
// dashboard, transcripts): the readers' page caches keep what they read, up
// to their cache_size. reader-cache=2000 is SQLite's default (the baseline),
// reader-cache=256 conch's (DefaultReaderCache), 512 between.
func BenchmarkHistoryAcross(b *testing.B) {
	for _, kib := range []int{2000, 512, DefaultReaderCache} {
		// One store a configuration: the benchmark function runs several
		// times while b.N is found.
		ctx := context.Background()
		d, err := Open(ctx, b.TempDir()+"/conch.db", WithSync(SyncNormal), WithReaderCache(kib))
		if err != nil {
			b.Fatal(err)
		}
		const convs = 100
		newSoakLoad(d, convs, 2*runtime.GOMAXPROCS(0)).run(ctx, b, 40)
		b.Run(fmt.Sprint("reader-cache=", kib), func(b *testing.B) {
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if h, err := d.History(ctx, soakKey(int(n.Add(1)%convs))); err != nil || len(h) != 80 {
						b.Errorf("%d messages, %v; want 80", len(h), err)
						return
					}
				}
			})
			b.StopTimer()
			_, r := connMemory(ctx, b, d)
			b.ReportMetric(mib(r.cache), "readers-cache-MiB")
		})
		d.Close()
	}
}
