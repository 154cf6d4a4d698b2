// Package benchtable turns `go test -bench` output into the table of the
// performance goals (goals.tsv): each goal's figure, its baseline measured in
// the same run, the ratio and whether the goal is met. `make bench` and
// `make soak` run it (cmd/benchtable) and it writes its section of
// docs/performance.md, leaving every other section as it was.
package benchtable

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Result is what one benchmark reported over one or more runs (-count).
type Result struct {
	// Name is the import path and the benchmark's full name without the
	// -GOMAXPROCS suffix: "conch/gateway.BenchmarkSustained".
	Name string
	// Runs is how many result lines the benchmark printed.
	Runs int
	// Metrics holds every value reported per unit, one per run.
	Metrics map[string][]float64
}

// Metric is the median of a unit's values over the runs.
func (r *Result) Metric(unit string) (float64, bool) {
	v := r.Metrics[unit]
	if len(v) == 0 {
		return 0, false
	}
	return median(v), true
}

// Status says why a benchmark gave no figures: it was skipped or failed.
type Status struct {
	Kind   string // "SKIP" or "FAIL"
	Reason string // the first log line under the --- line, if any
}

// Output is the parsed output of one or more `go test -bench` runs.
type Output struct {
	Results map[string]*Result
	// Status holds benchmarks reported by a "--- SKIP" or "--- FAIL" line.
	Status map[string]Status
	// Stamps are the "conch-bench: key value" lines (cmd/benchtable -stamp).
	Stamps map[string]string
	// Failed names packages whose test binary reported FAIL.
	Failed []string
}

var (
	procsSuffix = regexp.MustCompile(`-\d+$`)
	statusLine  = regexp.MustCompile(`^\s*--- (SKIP|FAIL|BENCH): (Benchmark\S*)`)
)

// StripProcs removes the -GOMAXPROCS suffix the testing package appends to a
// benchmark's name when GOMAXPROCS is not 1.
func StripProcs(name string) string {
	return procsSuffix.ReplaceAllString(name, "")
}

// Parse reads `go test -bench` output. The package of a benchmark is the last
// "pkg:" line before it; several packages' outputs may follow each other.
// Lines it does not know (logs, PASS, ok) are ignored.
func Parse(r io.Reader) (*Output, error) {
	out := &Output{Results: map[string]*Result{}, Status: map[string]Status{}, Stamps: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	pkg := ""
	pending := "" // a skipped or failed benchmark waiting for its reason
	split := ""   // a benchmark's name printed alone: output came between it and its figures
	for sc.Scan() {
		line := sc.Text()
		if pending != "" {
			st := out.Status[pending]
			if t := strings.TrimSpace(line); st.Reason == "" && strings.HasPrefix(line, "    ") && t != "" {
				st.Reason = t
				out.Status[pending] = st
				continue
			}
			pending = ""
		}
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = strings.TrimSpace(strings.TrimPrefix(line, "pkg: "))
			continue
		case strings.HasPrefix(line, "conch-bench: "):
			k, v, _ := strings.Cut(strings.TrimPrefix(line, "conch-bench: "), " ")
			if _, dup := out.Stamps[k]; !dup { // the first stamp of a key wins: "start" is the start
				out.Stamps[k] = strings.TrimSpace(v)
			}
			continue
		case strings.HasPrefix(line, "FAIL\t"):
			if f := strings.Fields(line); len(f) >= 2 {
				out.Failed = append(out.Failed, f[1])
			}
			continue
		}
		if m := statusLine.FindStringSubmatch(line); m != nil {
			if m[1] == "BENCH" { // the log header of a benchmark that ran
				continue
			}
			name := qualify(pkg, StripProcs(m[2]))
			out.Status[name] = Status{Kind: m[1]}
			pending = name
			continue
		}
		name, metrics, ok := parseResult(line)
		if !ok && split != "" {
			name, metrics, ok = parseResult(split + " " + line)
		}
		// A name followed by something else (a log line the benchmark
		// printed after its name, before its figures): the figures come
		// on a later line, after however many lines of output.
		if f := strings.Fields(line); !ok && len(f) >= 1 && strings.HasPrefix(f[0], "Benchmark") &&
			(len(f) == 1 || procsSuffix.MatchString(f[0])) {
			split = f[0]
			continue
		}
		if !ok {
			continue
		}
		split = ""
		if ok {
			full := qualify(pkg, name)
			res := out.Results[full]
			if res == nil {
				res = &Result{Name: full, Metrics: map[string][]float64{}}
				out.Results[full] = res
			}
			res.Runs++
			for unit, v := range metrics {
				res.Metrics[unit] = append(res.Metrics[unit], v)
			}
		}
	}
	return out, sc.Err()
}

func qualify(pkg, name string) string {
	if pkg == "" {
		return name
	}
	return pkg + "." + name
}

// parseResult reads a result line: "BenchmarkX/sub-2  <N>  <value> <unit> ...".
func parseResult(line string) (string, map[string]float64, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
		return "", nil, false
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return "", nil, false
	}
	metrics := map[string]float64{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		metrics[f[i+1]] = v
	}
	return StripProcs(f[0]), metrics, true
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// timeUnits are the suffixes of time metrics a figure may be converted
// between, with their size in nanoseconds.
var timeUnits = []struct {
	suffix string
	ns     float64
}{{"-ns", 1}, {"-µs", 1e3}, {"-us", 1e3}, {"-ms", 1e6}, {"-s", 1e9}}

// Lookup finds unit in r, or the same metric in another time unit
// ("agent-p50-µs" for "agent-p50-ms"), converted.
func (r *Result) Lookup(unit string) (float64, bool) {
	if v, ok := r.Metric(unit); ok {
		return v, true
	}
	for _, want := range timeUnits {
		stem, ok := strings.CutSuffix(unit, want.suffix)
		if !ok {
			continue
		}
		for _, have := range timeUnits {
			if v, ok := r.Metric(stem + have.suffix); ok {
				return v * have.ns / want.ns, true
			}
		}
		break
	}
	return 0, false
}
