package benchtable

import (
	"strings"
	"testing"
)

const doc = `# Performance

## First run

Prose someone wrote, with a table:

| a | b |
|---|---|
| 1 | 2 |

## Kubernetes backend

More prose.
`

// TestReplaceSectionKeepsTheRest writes both sections twice each and checks
// that everything else in the document stays byte for byte.
func TestReplaceSectionKeepsTheRest(t *testing.T) {
	d, err := ReplaceSection(doc, "bench", "table one\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d, doc) {
		t.Fatalf("the document's text changed:\n%s", d)
	}
	if !strings.Contains(d, "## make bench\n\n<!-- benchtable:bench:begin -->\ntable one\n<!-- benchtable:bench:end -->\n") {
		t.Fatalf("section not appended:\n%s", d)
	}
	// Prose under the section's heading but outside its markers, and a soak
	// section after it, survive a rewrite.
	d = strings.Replace(d, "## make bench\n\n", "## make bench\n\nA note by hand.\n\n", 1)
	d += "\nA trailing note.\n"
	d, err = ReplaceSection(d, "soak", "soak one")
	if err != nil {
		t.Fatal(err)
	}
	d, err = ReplaceSection(d, "bench", "table two\n")
	if err != nil {
		t.Fatal(err)
	}
	want := doc + "\n## make bench\n\nA note by hand.\n\n<!-- benchtable:bench:begin -->\ntable two\n<!-- benchtable:bench:end -->\n" +
		"\nA trailing note.\n\n## make soak\n\n<!-- benchtable:soak:begin -->\nsoak one\n<!-- benchtable:soak:end -->\n"
	if d != want {
		t.Fatalf("got:\n%s\nwant:\n%s", d, want)
	}
	again, err := ReplaceSection(d, "bench", "table two\n")
	if err != nil || again != d {
		t.Fatalf("rewriting the same body changed the document (%v)", err)
	}
}

func TestReplaceSectionRefusesBrokenMarkers(t *testing.T) {
	b, e := markers("bench")
	for name, d := range map[string]string{
		"only begin": doc + b + "\n",
		"only end":   doc + e + "\n",
		"reversed":   doc + e + "\nx\n" + b + "\n",
		"twice":      doc + b + "\n" + e + "\n" + b + "\n" + e + "\n",
	} {
		if _, err := ReplaceSection(d, "bench", "x"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ReplaceSection(doc+b+"\n"+e+"\n", "soak", "x"); err != nil {
		t.Errorf("another section's markers: %v", err)
	}
}

func TestReplaceSectionEmptyDocument(t *testing.T) {
	d, err := ReplaceSection("", "soak", "x")
	if err != nil || d != "## make soak\n\n<!-- benchtable:soak:begin -->\nx\n<!-- benchtable:soak:end -->\n" {
		t.Fatalf("%q, %v", d, err)
	}
}

func TestMarkdownAndText(t *testing.T) {
	rows := Evaluate(readGoals(t, "testdata/goals.tsv"), "bench", parseFile(t, "testdata/run.txt"))
	md := Markdown(rows)
	for _, want := range []string{
		"| row | what | conch | baseline | ratio | goal | met? |",
		"| 1 | exec docker | 2.31 agent-p50-ms | 1.10 host-p50-ms | 2.10× | ratio<=1.3 | no |",
		"| 1 | exec podman | not measured (skipped: bench_test.go:62: podman: no engine (CONCH_TEST_PODMAN unset)) | not measured | — | ratio<=1.3 | no |",
		"| 4 | sustained | 4321 msgs/s | — | — | >=5000 | no |",
		"| 5 | long | 0.905 turn1000-p50-ms | 0.812 turn10-p50-ms | 1.11× | ratio<=1.2 | yes |",
		"| 9 | binary | not measured (not run) | — | — | <=60 | no |",
		"6 of 14 goals met.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	txt := Text(rows)
	if !strings.Contains(txt, "6 of 14 goals met") || strings.Count(txt, "\n") != len(rows)+2 {
		t.Errorf("text:\n%s", txt)
	}
}

func TestFigure(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 4321: "4321", 12.345: "12.3", 2.3456: "2.35", 0.41: "0.410", 0.0123: "0.0123", -1.5: "-1.50"} {
		if got := Figure(v); got != want {
			t.Errorf("Figure(%v) = %q, want %q", v, got, want)
		}
	}
}
