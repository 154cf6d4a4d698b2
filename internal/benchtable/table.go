package benchtable

import (
	"fmt"
	"strconv"
	"strings"
)

// Figure formats a value with three significant digits, never in exponent form.
func Figure(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	prec := 0
	switch {
	case a == 0 || a >= 100:
		prec = 0
	case a >= 10:
		prec = 1
	case a >= 1:
		prec = 2
	default:
		prec = 3
		for x := a; x < 0.1 && prec < 9; x *= 10 {
			prec++
		}
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// Summary counts met rows.
func Summary(rows []Row) (met, total int) {
	for _, r := range rows {
		if r.Met {
			met++
		}
	}
	return met, len(rows)
}

// cells are a row's columns: row, what, conch, baseline, ratio, goal, met?
func cells(r Row) []string {
	conch, base, ratio := "not measured", "—", "—"
	if r.Measured {
		conch = Figure(r.Value) + " " + r.Metric
	} else if r.Note != "" {
		conch = "not measured (" + r.Note + ")"
	}
	if r.Baseline != "" {
		base = "not measured"
		if r.HasBaseline {
			base = Figure(r.Base) + " " + r.Baseline
		}
		if r.Measured && r.HasBaseline && r.Base != 0 {
			ratio = Figure(r.Ratio) + "×"
		}
	}
	met := "no"
	if r.Met {
		met = "yes"
	}
	return []string{r.Row, r.What, conch, base, ratio, r.Goal.Goal, met}
}

var header = []string{"row", "what", "conch", "baseline", "ratio", "goal", "met?"}

// Markdown renders the rows as a Markdown table, "|" in cells escaped.
func Markdown(rows []Row) string {
	var b strings.Builder
	line := func(c []string) {
		for i := range c {
			c[i] = strings.ReplaceAll(c[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(c, " | ") + " |\n")
	}
	line(append([]string(nil), header...))
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		line(cells(r))
	}
	met, total := Summary(rows)
	fmt.Fprintf(&b, "\n%d of %d goals met.\n", met, total)
	if floors := unmetFloors(rows); len(floors) > 0 {
		b.WriteString("\nWhy a goal is not met, and the floor:\n\n")
		for _, f := range floors {
			b.WriteString("- " + f + "\n")
		}
	}
	return b.String()
}

// unmetFloors are the floors of the rows not met, "row N (what): floor",
// each once (two rows of one goal may share a floor).
func unmetFloors(rows []Row) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Met || r.Floor == "" {
			continue
		}
		s := "row " + r.Row + " (" + r.What + "): " + r.Floor
		if !seen[r.Row+r.Floor] {
			seen[r.Row+r.Floor] = true
			out = append(out, s)
		}
	}
	return out
}

// Text renders the rows as a plain aligned table for a terminal.
func Text(rows []Row) string {
	all := [][]string{header}
	for _, r := range rows {
		all = append(all, cells(r))
	}
	width := make([]int, len(header))
	for _, c := range all {
		for i, s := range c {
			width[i] = max(width[i], len([]rune(s)))
		}
	}
	var b strings.Builder
	for _, c := range all {
		for i, s := range c {
			if i > 0 {
				b.WriteString("  ")
			}
			if i == len(c)-1 {
				b.WriteString(s)
				continue
			}
			b.WriteString(s + strings.Repeat(" ", width[i]-len([]rune(s))))
		}
		b.WriteString("\n")
	}
	met, total := Summary(rows)
	fmt.Fprintf(&b, "%d of %d goals met\n", met, total)
	for _, f := range unmetFloors(rows) {
		b.WriteString("  not met: " + f + "\n")
	}
	return b.String()
}
