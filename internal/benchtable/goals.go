package benchtable

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Goal is one row of goals.tsv.
type Goal struct {
	Section   string // "bench" or "soak"
	Row       string // the row number
	What      string
	Benchmark string // import path + "." + full name, no -GOMAXPROCS suffix
	Metric    string
	Baseline  string // a unit of the same benchmark, or "" for none
	Goal      string // "<=X", ">=X", "ratio<=X" or "ratio>=X"
	// Floor, optional, says why the goal is not met where it is not, and
	// what the floor is (with the profile or section that shows it); the
	// table prints it under a row that is not met.
	Floor string
	Line  int // in goals.tsv
}

// ReadGoals reads goals.tsv: "#" starts a comment line, every other non-blank
// line has the seven tab-separated fields of the header, and optionally an
// eighth: the floor (see Goal.Floor).
func ReadGoals(r io.Reader) ([]Goal, error) {
	var goals []Goal
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 7 && len(f) != 8 {
			return nil, fmt.Errorf("goals line %d: %d tab-separated fields, want 7 or 8 (section row what benchmark metric baseline goal [floor])", n, len(f))
		}
		g := Goal{Section: f[0], Row: f[1], What: f[2], Benchmark: f[3], Metric: f[4], Baseline: f[5], Goal: f[6], Line: n}
		if len(f) == 8 {
			g.Floor = strings.TrimSpace(f[7])
		}
		if g.Baseline == "-" {
			g.Baseline = ""
		}
		if _, _, _, err := parseGoal(g.Goal); err != nil {
			return nil, fmt.Errorf("goals line %d: %v", n, err)
		}
		if strings.HasPrefix(g.Goal, "ratio") && g.Baseline == "" {
			return nil, fmt.Errorf("goals line %d: goal %q needs a baseline", n, g.Goal)
		}
		goals = append(goals, g)
	}
	return goals, sc.Err()
}

// parseGoal splits "ratio<=1.3" into (true, "<=", 1.3).
func parseGoal(s string) (ratio bool, op string, x float64, err error) {
	rest, ratio := strings.CutPrefix(s, "ratio")
	switch {
	case strings.HasPrefix(rest, "<="):
		op = "<="
	case strings.HasPrefix(rest, ">="):
		op = ">="
	default:
		return false, "", 0, fmt.Errorf("goal %q: want <=X, >=X, ratio<=X or ratio>=X", s)
	}
	x, err = strconv.ParseFloat(rest[2:], 64)
	if err != nil {
		return false, "", 0, fmt.Errorf("goal %q: %v", s, err)
	}
	return ratio, op, x, nil
}

// Row is one goal with its figures from a run.
type Row struct {
	Goal
	Measured    bool
	Value       float64
	HasBaseline bool
	Base        float64
	Ratio       float64 // Value/Base when HasBaseline and Base != 0
	Met         bool
	// Note says why a row is not measured ("not run", "skipped: …").
	Note string
}

// Evaluate fills one Row per goal of section from out. A goal whose
// benchmark did not run, or ran without the metric (or the baseline a ratio
// goal needs), is not measured and not met.
func Evaluate(goals []Goal, section string, out *Output) []Row {
	var rows []Row
	for _, g := range goals {
		if g.Section != section {
			continue
		}
		rows = append(rows, evaluate(g, out))
	}
	return rows
}

func evaluate(g Goal, out *Output) Row {
	row := Row{Goal: g}
	res := out.Results[g.Benchmark]
	if res == nil {
		row.Note = "not run"
		if st, ok := out.Status[g.Benchmark]; ok {
			row.Note = statusNote(st)
		} else if st, ok := parentStatus(out, g.Benchmark); ok {
			row.Note = statusNote(st)
		}
		return row
	}
	row.Value, row.Measured = res.Lookup(g.Metric)
	if !row.Measured {
		row.Note = "no " + g.Metric + " reported"
		return row
	}
	if g.Baseline != "" {
		row.Base, row.HasBaseline = res.Lookup(g.Baseline)
		if row.HasBaseline && row.Base != 0 {
			row.Ratio = row.Value / row.Base
		}
	}
	ratio, op, x, _ := parseGoal(g.Goal)
	v := row.Value
	if ratio {
		if !row.HasBaseline || row.Base == 0 {
			row.Measured = false
			row.Note = "no baseline " + g.Baseline + " reported"
			return row
		}
		v = row.Ratio
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		row.Note = "not a number"
		return row
	}
	switch op {
	case "<=":
		row.Met = v <= x
	case ">=":
		row.Met = v >= x
	}
	return row
}

// parentStatus finds the status of a parent benchmark: a skipped
// BenchmarkX skips BenchmarkX/docker.
func parentStatus(out *Output, name string) (Status, bool) {
	for {
		i := strings.LastIndex(name, "/")
		if i < 0 {
			return Status{}, false
		}
		name = name[:i]
		if st, ok := out.Status[name]; ok {
			return st, true
		}
	}
}

func statusNote(st Status) string {
	kind := "skipped"
	if st.Kind == "FAIL" {
		kind = "failed"
	}
	if st.Reason == "" {
		return kind
	}
	return kind + ": " + st.Reason
}
