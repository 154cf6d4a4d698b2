package benchtable

import (
	"os"
	"strings"
	"testing"
)

func readGoals(t *testing.T, path string) []Goal {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := ReadGoals(f)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGoalsFile checks the real goals.tsv: it parses, every row names a
// package of the module and a section the tool knows.
func TestGoalsFile(t *testing.T) {
	goals := readGoals(t, "goals.tsv")
	if len(goals) < 10 {
		t.Fatalf("%d goals", len(goals))
	}
	for _, g := range goals {
		if _, ok := Headings[g.Section]; !ok {
			t.Errorf("line %d: section %q", g.Line, g.Section)
		}
		pkg, name, ok := strings.Cut(g.Benchmark, ".Benchmark")
		if !ok || !strings.HasPrefix(pkg, "conch/") || name == "" {
			t.Errorf("line %d: benchmark %q is not <import path>.Benchmark<name>", g.Line, g.Benchmark)
			continue
		}
		if _, err := os.Stat("../../" + strings.TrimPrefix(pkg, "conch/")); err != nil {
			t.Errorf("line %d: package %s: %v", g.Line, pkg, err)
		}
	}
}

func TestReadGoalsErrors(t *testing.T) {
	for name, in := range map[string]string{
		"fields":         "bench\t1\twhat\tconch/x.BenchmarkX\tp50-ms\t-\n",
		"goal":           "bench\t1\twhat\tconch/x.BenchmarkX\tp50-ms\t-\t<5\n",
		"number":         "bench\t1\twhat\tconch/x.BenchmarkX\tp50-ms\t-\t<=five\n",
		"ratio baseline": "bench\t1\twhat\tconch/x.BenchmarkX\tp50-ms\t-\tratio<=1.1\n",
	} {
		if _, err := ReadGoals(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestEvaluateRecorded evaluates the real goals against the recorded run:
// every outcome a row can have appears.
func TestEvaluateRecorded(t *testing.T) {
	goals := readGoals(t, "testdata/goals.tsv")
	out := parseFile(t, "testdata/run.txt")
	rows := Evaluate(goals, "bench", out)
	byWhat := map[string]Row{}
	for _, r := range rows {
		if r.Section != "bench" {
			t.Errorf("row of section %s", r.Section)
		}
		byWhat[r.What] = r
	}
	check := func(what string, measured, met bool, note string) Row {
		t.Helper()
		r, ok := byWhat[what]
		if !ok {
			t.Fatalf("no row %q", what)
		}
		if r.Measured != measured || r.Met != met || !strings.Contains(r.Note, note) {
			t.Errorf("%s: measured %v met %v note %q; want %v %v %q", what, r.Measured, r.Met, r.Note, measured, met, note)
		}
		return r
	}
	r := check("exec docker", true, false, "") // 2.31/1.1 = 2.1 > 1.3
	if !near(r.Ratio, 2.31/1.1) {
		t.Errorf("ratio = %v", r.Ratio)
	}
	check("exec podman", false, false, "skipped: bench_test.go:62: podman: no engine")
	check("warm", true, true, "")
	check("cold", true, true, "") // 402/610 = 0.66
	check("latency", true, true, "")
	check("sustained", true, false, "") // 4321 < 5000
	r = check("long", true, true, "")   // reported in µs, the goal in ms: 905/812 = 1.11 <= 1.2
	if !near(r.Value, 0.905) || !near(r.Base, 0.812) {
		t.Errorf("long: %v / %v, want the µs figures in ms", r.Value, r.Base)
	}
	check("web", true, true, "")
	check("restart", false, false, "failed: restart_bench_test.go:77: conch up: exit status 1")
	check("claude", false, false, "skipped: realcli_test.go:390") // the parent benchmark skipped
	check("binary", false, false, "not run")
	check("anon", false, false, "no anon-MiB reported")
	check("missing baseline", false, false, "no baseline nope-p50-ms reported")
	check("rss", true, true, "")

	if got := Evaluate(goals, "soak", out); len(got) != 1 || got[0].Measured || got[0].Met || got[0].Note != "not run" {
		t.Errorf("soak rows = %+v", got)
	}
}

// TestFloorPrinted: a row that is not met prints its floor under the
// table; a met row's floor and a floor without its row's failure do not.
func TestFloorPrinted(t *testing.T) {
	goals, err := ReadGoals(strings.NewReader(
		"bench\t4\tslow one\tconch/x.BenchmarkA\tp50-ms\t-\t<=1\tone fsync per message: 1.2 ms here\n" +
			"bench\t5\tfast one\tconch/x.BenchmarkB\tp50-ms\t-\t<=1\tnever printed\n" +
			"bench\t6\tno floor\tconch/x.BenchmarkC\tp50-ms\t-\t<=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if goals[0].Floor != "one fsync per message: 1.2 ms here" || goals[2].Floor != "" {
		t.Fatalf("floors: %q %q", goals[0].Floor, goals[2].Floor)
	}
	rows := []Row{
		{Goal: goals[0], Measured: true, Value: 1.4},
		{Goal: goals[1], Measured: true, Value: 0.4, Met: true},
		{Goal: goals[2], Measured: true, Value: 3},
	}
	for name, out := range map[string]string{"markdown": Markdown(rows), "text": Text(rows)} {
		if !strings.Contains(out, "row 4 (slow one): one fsync per message: 1.2 ms here") {
			t.Errorf("%s: the unmet row's floor is missing:\n%s", name, out)
		}
		if strings.Contains(out, "never printed") {
			t.Errorf("%s: a met row's floor is printed:\n%s", name, out)
		}
	}
}
