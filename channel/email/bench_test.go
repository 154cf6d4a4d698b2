package email

import (
	"fmt"
	"slices"
	"testing"
	"time"

	testmail "conch/internal/testenv/mail"
)

// BenchmarkReplyLatency measures, on the real mail server, the time from a
// person's SMTP submission to the reply's arrival in their mailbox, with a
// handler that answers at once (a scripted model): IDLE against polling
// (every second) in the same run. It reports the median as p50-ms.
func BenchmarkReplyLatency(b *testing.B) {
	for _, mode := range []struct {
		name string
		mod  func(*Options)
	}{
		{"idle", nil},
		{"poll-1s", func(o *Options) { o.NoIDLE, o.PollInterval = true, time.Second }},
	} {
		b.Run(mode.name, func(b *testing.B) {
			srv := testmail.Shared(b)
			f := newFixture(b, srv, mode.mod)
			f.start(b)
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprintf("bench-%s-%d@example.test", mode.name, i)
				start := time.Now()
				srv.MustSend(b, f.alice.Address, []string{f.conch.Address}, rawMail([]string{
					"From: " + f.alice.Address, "To: " + f.conch.Address, "Subject: bench", "Message-ID: <" + id + ">",
				}, "ping\n"))
				srv.MustWait(b, f.alice, i+1, 30*time.Second)
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		})
	}
}
