package benchtable

import (
	"math"
	"os"
	"strings"
	"testing"
)

func parseFile(t *testing.T, path string) *Output {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestParseRecorded reads a recorded run of several packages: real output of
// the sandboxd benchmarks (µs units, sub-benchmarks) and of the others.
func TestParseRecorded(t *testing.T) {
	out := parseFile(t, "testdata/run.txt")
	for _, c := range []struct {
		bench, unit string
		want        float64
	}{
		{"conch/sandbox/sandboxd.BenchmarkPing", "agent-subprocess-p50-µs", 16.62},
		{"conch/sandbox/sandboxd.BenchmarkPingUnderLoad/subprocess", "loaded-p99-µs", 1409},
		{"conch/sandbox/sandboxd.BenchmarkPingUnderLoad/inprocess", "load-MB/s", 0},
		{"conch/gateway.BenchmarkMessageLatency", "p50-ms", 0.41}, // median of three runs
		{"conch/gateway.BenchmarkSustained", "msgs/s", 4321},
		{"conch/gateway.BenchmarkSustained", "ns/op", 231456789},
		{"conch/sandbox/docker.BenchmarkExecRoundTrip/docker", "host-p50-ms", 1.1},
		{"conch/cmd/conch.BenchmarkWebRoundTrip", "web-p50-ms", 5.2},
	} {
		res := out.Results[c.bench]
		if res == nil {
			t.Errorf("%s: not parsed; have %v", c.bench, keys(out.Results))
			continue
		}
		if got, ok := res.Metric(c.unit); !ok || !near(got, c.want) {
			t.Errorf("%s %s = %v, %v; want %v", c.bench, c.unit, got, ok, c.want)
		}
	}
	if n := out.Results["conch/gateway.BenchmarkMessageLatency"].Runs; n != 3 {
		t.Errorf("BenchmarkMessageLatency runs = %d, want 3", n)
	}
	if st := out.Status["conch/sandbox/docker.BenchmarkExecRoundTrip/podman"]; st.Kind != "SKIP" || !strings.Contains(st.Reason, "no engine") {
		t.Errorf("podman status = %+v", st)
	}
	if st := out.Status["conch/cmd/conch.BenchmarkRestart"]; st.Kind != "FAIL" || !strings.Contains(st.Reason, "exit status 1") {
		t.Errorf("restart status = %+v", st)
	}
	if len(out.Failed) != 1 || out.Failed[0] != "conch/cmd/conch" {
		t.Errorf("failed packages = %v", out.Failed)
	}
	if out.Stamps["start"] != "2026-11-26 03:40 UTC" || out.Stamps["load-start"] != "3.10 2.50 2.00" {
		t.Errorf("stamps = %v", out.Stamps)
	}
}

func keys[V any](m map[string]V) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

func TestParseEdgeCases(t *testing.T) {
	in := strings.Join([]string{
		"pkg: conch/x",
		// GOMAXPROCS 1: no suffix; a sub-benchmark whose own name ends in a number keeps it
		// only when the suffix is there too.
		"BenchmarkA/size-64-8   \t 1000\t 12.5 ns/op",
		"BenchmarkB             \t 10\t 3.0 p50-ms",
		// output between the name and its figures
		"BenchmarkC-2   \t",
		"some child process wrote this",
		"BenchmarkD-2",
		"      1\t  7.5 p50-ms",
		"BenchmarkE-2 garbage line that is not a result",
		// a log line printed after the name, on its line, then the figures
		"BenchmarkG/codex-2 \t2026/11/26 04:55:30 WARN egress injector: request refused method=CONNECT",
		"      10\t  9.351 notice-p50-ms\t  66.63 notice-p99-ms",
		"--- BENCH: BenchmarkB",
		"    x_test.go:1: a log line",
		"--- SKIP: BenchmarkF-2",
		"",
		"ok  \tconch/x\t1.0s",
	}, "\n")
	out, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Results["conch/x.BenchmarkA/size-64"]; !ok {
		t.Errorf("BenchmarkA/size-64 missing: %v", keys(out.Results))
	}
	if _, ok := out.Results["conch/x.BenchmarkB"]; !ok {
		t.Errorf("BenchmarkB missing: %v", keys(out.Results))
	}
	if r := out.Results["conch/x.BenchmarkD"]; r == nil || r.Metrics["p50-ms"][0] != 7.5 {
		t.Errorf("split BenchmarkD = %+v", r)
	}
	if r := out.Results["conch/x.BenchmarkG/codex"]; r == nil || r.Metrics["notice-p50-ms"][0] != 9.351 {
		t.Errorf("BenchmarkG/codex after a log line on its name's line = %+v", r)
	}
	if _, ok := out.Results["conch/x.BenchmarkC"]; ok {
		t.Error("BenchmarkC has no figures but was parsed")
	}
	if _, ok := out.Results["conch/x.BenchmarkE"]; ok {
		t.Error("a garbage line was parsed as a result")
	}
	if st, ok := out.Status["conch/x.BenchmarkF"]; !ok || st.Kind != "SKIP" || st.Reason != "" {
		t.Errorf("F status = %+v, %v", st, ok)
	}
	if len(out.Status) != 1 {
		t.Errorf("statuses = %v (a --- BENCH line is not one)", out.Status)
	}
}

func TestLookupConvertsTimeUnits(t *testing.T) {
	r := &Result{Metrics: map[string][]float64{"agent-p50-µs": {1500}, "x-p50-ns": {2e6}, "n-s": {2}}}
	for unit, want := range map[string]float64{"agent-p50-ms": 1.5, "agent-p50-us": 1500, "x-p50-ms": 2, "n-ms": 2000} {
		if got, ok := r.Lookup(unit); !ok || !near(got, want) {
			t.Errorf("Lookup(%s) = %v, %v; want %v", unit, got, ok, want)
		}
	}
	if _, ok := r.Lookup("other-p50-ms"); ok {
		t.Error("found a metric that is not there")
	}
	if _, ok := r.Lookup("msgs/s"); ok {
		t.Error("msgs/s converted from something")
	}
}

func TestStripProcs(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkX-2":          "BenchmarkX",
		"BenchmarkX/docker-16":  "BenchmarkX/docker",
		"BenchmarkX":            "BenchmarkX",
		"BenchmarkX/podman":     "BenchmarkX/podman",
		"BenchmarkX/n=10-2":     "BenchmarkX/n=10",
		"BenchmarkX/run-fast-2": "BenchmarkX/run-fast",
	} {
		if got := StripProcs(in); got != want {
			t.Errorf("StripProcs(%q) = %q, want %q", in, got, want)
		}
	}
}
