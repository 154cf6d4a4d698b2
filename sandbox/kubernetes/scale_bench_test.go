//go:build kubernetes

package kubernetes_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/kube"
	"conch/sandbox/kubernetes"

	"k8s.io/client-go/rest"
)

// callCounter counts the requests conch's client sends the API server.
type callCounter struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c callCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(req)
}

// counted is o with every API request counted in n.
func counted(o kubernetes.Options, n *atomic.Int64) kubernetes.Options {
	rc := rest.CopyConfig(o.REST)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return callCounter{next: rt, n: n} })
	o.REST = rc
	return o
}

// BenchmarkFirstCommand is a new conversation's first command (`true`):
// "cold" creates the claim and the pod and waits for it (on the test node:
// no image pull, no volume provisioning), "warm-pool" binds a pool pod by
// relabelling it (the pool refilled outside the clock). Same run, same node.
//
//	go test -tags goolm,kubernetes -run '^$' -bench FirstCommand -benchtime 10x ./sandbox/kubernetes/
func BenchmarkFirstCommand(b *testing.B) {
	e := env{kube.Sandboxes(b)}
	ctx := context.Background()
	req := conch.ExecRequest{Argv: []string{"true"}}
	for _, c := range []struct {
		name string
		pool int
	}{{"cold", 0}, {"warm-pool", 1}} {
		b.Run(c.name, func(b *testing.B) {
			var calls atomic.Int64
			o := counted(e.options(b, func(o *kubernetes.Options) { o.WarmPool = c.pool }), &calls)
			rt, err := kubernetes.New(ctx, o)
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close()
			var total int64
			i := 0
			for b.Loop() {
				b.StopTimer()
				if err := rt.FillPool(ctx); err != nil {
					b.Fatal(err)
				}
				i++
				key := conch.ConversationKey{Channel: "bench", ID: fmt.Sprint(i)}
				before := calls.Load()
				b.StartTimer()
				sb, err := rt.Sandbox(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				if res, err := sb.Exec(ctx, req); err != nil || res.ExitCode != 0 {
					b.Fatalf("%+v %v", res, err)
				}
				b.StopTimer()
				total += calls.Load() - before
				if err := rt.Remove(ctx, key); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(total)/float64(i), "api-calls/op")
		})
	}
}

// BenchmarkFiftyConversations: 50 new conversations' first commands at
// once (wall time, API requests), then a restart's Reconcile over their 50
// pods and claims (wall time, API requests). One op is one batch of 50.
//
//	go test -tags goolm,kubernetes -run '^$' -bench FiftyConversations -benchtime 1x ./sandbox/kubernetes/
func BenchmarkFiftyConversations(b *testing.B) {
	const n = 50
	e := env{kube.Sandboxes(b)}
	ctx := context.Background()
	req := conch.ExecRequest{Argv: []string{"true"}}
	batch := 0
	for b.Loop() {
		b.StopTimer()
		batch++
		var calls atomic.Int64
		o := counted(e.options(b, nil), &calls)
		rt, err := kubernetes.New(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		keys := make([]conch.ConversationKey, n)
		for i := range keys {
			keys[i] = conch.ConversationKey{Channel: "bench", ID: fmt.Sprintf("%d-%d", batch, i)}
		}
		calls.Store(0)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, k := range keys {
			wg.Go(func() {
				sb, err := rt.Sandbox(ctx, k)
				if err == nil {
					_, err = sb.Exec(ctx, req)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		created, createCalls := time.Since(start), calls.Load()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		rt.Close()

		var rcalls atomic.Int64
		o2 := counted(o, &rcalls)
		o2.Known = func(context.Context) ([]conch.ConversationKey, error) { return keys, nil }
		rt2, err := kubernetes.New(ctx, o2)
		if err != nil {
			b.Fatal(err)
		}
		rcalls.Store(0)
		start = time.Now()
		if err := rt2.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		reconciled, reconcileCalls := time.Since(start), rcalls.Load()
		list, err := rt2.Sandboxes(ctx)
		if err != nil || len(list) != n {
			b.Fatalf("%d sandboxes after reconcile, %v", len(list), err)
		}
		for _, k := range keys {
			if err := rt2.Remove(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
		rt2.Close()
		b.ReportMetric(created.Seconds(), "create-50-s")
		b.ReportMetric(float64(createCalls), "create-50-api-calls")
		b.ReportMetric(reconciled.Seconds()*1000, "reconcile-50-ms")
		b.ReportMetric(float64(reconcileCalls), "reconcile-50-api-calls")
		b.StartTimer()
	}
}
