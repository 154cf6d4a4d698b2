package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunWritesItsSection runs the command on the recorded output: the
// table is printed, the bench section written into a copy of the real
// docs/performance.md whose other text stays as it was, then the soak
// section beside it.
func TestRunWritesItsSection(t *testing.T) {
	orig, err := os.ReadFile("../../../../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	doc := filepath.Join(dir, "performance.md")
	if err := os.WriteFile(doc, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join(dir, "proc")
	os.MkdirAll(filepath.Join(proc, "sys/kernel"), 0o755)
	os.WriteFile(filepath.Join(proc, "loadavg"), []byte("7.50 6.00 5.00 3/900 12345\n"), 0o644)
	os.WriteFile(filepath.Join(proc, "cpuinfo"), []byte("processor\t: 0\nmodel name\t: Test CPU @ 2.0GHz\n"), 0o644)
	os.WriteFile(filepath.Join(proc, "meminfo"), []byte("MemTotal:        8388608 kB\nMemFree: 1 kB\n"), 0o644)
	os.WriteFile(filepath.Join(proc, "sys/kernel/osrelease"), []byte("6.1.0-test\n"), 0o644)

	var stdout bytes.Buffer
	args := []string{"-section", "bench", "-goals", "../../testdata/goals.tsv", "-doc", doc, "-proc", proc, "../../testdata/run.txt"}
	if err := run(args, nil, &stdout); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "6 of 14 goals met") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	got, _ := os.ReadFile(doc)
	if !strings.HasPrefix(outside(got), outside(orig)) {
		t.Fatal("the rest of the document changed")
	}
	added := section(got, "bench")
	if !strings.Contains(outside(got), "## make bench\n") {
		t.Error("no heading for the bench section")
	}
	for _, want := range []string{
		"Run 2026-11-26 03:40 UTC on ",
		"(Test CPU @ 2.0GHz), Linux 6.1.0-test, 8.0 GiB memory; load average 3.10 2.50 2.00 at the start, 7.50 6.00 5.00 at the end; go1.",
		"; commit 0123456789ab (dirty: uncommitted changes).",
		"Packages that failed: conch/cmd/conch.",
		"| 4 | sustained | 4321 msgs/s | — | — | >=5000 | no |",
	} {
		if !strings.Contains(added, want) {
			t.Errorf("section lacks %q:\n%s", want, added)
		}
	}

	// The soak section goes beside it; the bench section stays.
	if err := run([]string{"-section", "soak", "-goals", "../../testdata/goals.tsv", "-doc", doc, "-proc", proc, "../../testdata/run.txt"}, nil, &stdout); err != nil {
		t.Fatal(err)
	}
	got2, _ := os.ReadFile(doc)
	if !strings.HasPrefix(outside(got2), outside(got)) || !strings.Contains(outside(got2), "## make soak") ||
		section(got2, "bench") != added || !strings.Contains(section(got2, "soak"), "| 11 | soak rss | not measured (not run) | — | — | <=40 | no |") {
		t.Errorf("soak section:\n%s", got2)
	}

	// -strict fails when a goal is not met; bad input fails.
	if err := run([]string{"-strict", "-section", "soak", "-goals", "../../testdata/goals.tsv", "-doc", "", "../../testdata/run.txt"}, nil, &stdout); err == nil || !strings.Contains(err.Error(), "1 of 1 goals not met") {
		t.Errorf("strict: %v", err)
	}
	if err := run([]string{"-section", "nope", "-goals", "../../testdata/goals.tsv", "-doc", ""}, strings.NewReader(""), &stdout); err == nil {
		t.Error("unknown section accepted")
	}
	if err := run([]string{"-doc", "", "-goals", "../../testdata/goals.tsv", filepath.Join(dir, "missing.txt")}, nil, &stdout); err == nil {
		t.Error("missing input accepted")
	}
}

// section is the text between a section's markers.
func section(doc []byte, name string) string {
	_, rest, _ := strings.Cut(string(doc), "<!-- benchtable:"+name+":begin -->")
	in, _, _ := strings.Cut(rest, "<!-- benchtable:"+name+":end -->")
	return in
}

// outside is the document with what is between the sections' markers
// left out: what benchtable must never change.
func outside(doc []byte) string {
	s := string(doc)
	for _, name := range []string{"bench", "soak"} {
		if in := section([]byte(s), name); in != "" {
			s = strings.Replace(s, in, "", 1)
		}
	}
	return s
}

func TestStamp(t *testing.T) {
	proc := t.TempDir()
	os.WriteFile(filepath.Join(proc, "loadavg"), []byte("1.00 2.00 3.00 1/2 3\n"), 0o644)
	var out bytes.Buffer
	if err := run([]string{"-stamp", "-proc", proc}, nil, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "conch-bench: start 20") || !strings.Contains(out.String(), "conch-bench: load-start 1.00 2.00 3.00\n") ||
		!strings.Contains(out.String(), "conch-bench: commit ") || !strings.Contains(out.String(), "conch-bench: dirty ") {
		t.Errorf("stamp:\n%s", out.String())
	}
}
