//go:build kubernetes

package kubernetes

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// Wire-exact answers of an API server aggregating metrics-server
// (metrics.k8s.io/v1beta1, the Kubernetes API reference's PodMetrics and
// the group's discovery document as metrics-server v0.8 serves them).
const (
	metricsDiscovery = `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"metrics.k8s.io/v1beta1",` +
		`"resources":[{"name":"nodes","singularName":"","namespaced":false,"kind":"NodeMetrics","verbs":["get","list"]},` +
		`{"name":"pods","singularName":"","namespaced":true,"kind":"PodMetrics","verbs":["get","list"]}]}`
	podMetricsJSON = `{"kind":"PodMetrics","apiVersion":"metrics.k8s.io/v1beta1",` +
		`"metadata":{"name":"conch-cli-local-1","namespace":"conch","creationTimestamp":"2026-11-26T03:00:00Z",` +
		`"labels":{"conch.sandbox":"true"}},"timestamp":"2026-11-26T02:59:51Z","window":"10.5s",` +
		`"containers":[{"name":"skills","usage":{"cpu":"0","memory":"3012Ki"}},` +
		`{"name":"sandbox","usage":{"cpu":"253174939n","memory":"118640Ki"}}]}`
	notFoundJSON = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`
	podNotFoundJSON = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"podmetrics.metrics.k8s.io \"conch-new\" not found","reason":"NotFound",` +
		`"details":{"name":"conch-new","group":"metrics.k8s.io","kind":"pods"},"code":404}`
)

// fakeAPI answers the metrics group (when served) and counts requests.
func fakeAPI(t *testing.T, served *atomic.Bool) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		notFound := func(body string) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(body))
		}
		if !served.Load() {
			notFound(notFoundJSON)
			return
		}
		switch r.URL.Path {
		case "/apis/metrics.k8s.io/v1beta1":
			_, _ = w.Write([]byte(metricsDiscovery))
		case "/apis/metrics.k8s.io/v1beta1/namespaces/conch/pods/conch-cli-local-1":
			_, _ = w.Write([]byte(podMetricsJSON))
		case "/apis/metrics.k8s.io/v1beta1/namespaces/conch/pods/conch-new":
			notFound(podNotFoundJSON)
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL)
			notFound(notFoundJSON)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestMetricsReader(t *testing.T) {
	var served atomic.Bool
	srv, _ := fakeAPI(t, &served)
	now := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	rc := &rest.Config{Host: srv.URL}
	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMetricsReader(rc, disco, "conch", func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// No metrics API: unknown, and discovery is not asked again soon.
	for range 3 {
		u, err := m.container(ctx, "conch-cli-local-1", SandboxContainer)
		if err != nil || u.ok {
			t.Fatalf("without the API: %+v %v, want unknown", u, err)
		}
	}
	if m.lookedFor != 1 {
		t.Fatalf("discovery asked %d times, want once (cached)", m.lookedFor)
	}

	// metrics-server installed: found after the recheck interval.
	served.Store(true)
	if u, _ := m.container(ctx, "conch-cli-local-1", SandboxContainer); u.ok {
		t.Fatal("the cached absence was not kept")
	}
	now = now.Add(metricsRecheck)
	u, err := m.container(ctx, "conch-cli-local-1", SandboxContainer)
	if err != nil || !u.ok {
		t.Fatalf("with the API: %+v %v", u, err)
	}
	if u.MemoryBytes != 118640*1024 || u.CPUPercent < 25.31 || u.CPUPercent > 25.32 {
		t.Fatalf("decoded %+v, want 25.3%% of a CPU and 118640 KiB", u)
	}
	// A pod with no sample yet, and a container the pod does not have.
	if u, err := m.container(ctx, "conch-new", SandboxContainer); err != nil || u.ok {
		t.Fatalf("a new pod: %+v %v, want unknown without an error", u, err)
	}
	if u, err := m.container(ctx, "conch-cli-local-1", "other"); err != nil || u.ok {
		t.Fatalf("another container: %+v %v", u, err)
	}
	if m.lookedFor != 2 {
		t.Fatalf("discovery asked %d times, want 2", m.lookedFor)
	}
}
