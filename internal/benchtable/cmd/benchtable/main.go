// Command benchtable reads `go test -bench` output and the goals of
// internal/benchtable/goals.tsv, prints the summary table (row, what, conch,
// baseline, ratio, goal, met?) and writes it into its section of
// docs/performance.md ("## make bench" or "## make soak"), between the
// section's markers; the rest of the file is never touched.
//
//	benchtable -stamp >> bench-out/bench-X.txt      # at the start of a run
//	go test -bench ... | tee -a bench-out/bench-X.txt
//	benchtable -section bench bench-out/bench-X.txt
//
// It exits 1 on unreadable input or goals, and with -strict also when a goal
// is not met.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"conch/internal/benchtable"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("benchtable", flag.ContinueOnError)
	section := fs.String("section", "bench", "the goals' section and the document's section: bench or soak")
	goalsPath := fs.String("goals", "internal/benchtable/goals.tsv", "the goals file")
	docPath := fs.String("doc", "docs/performance.md", "the document to write the section into (\"\" writes nothing)")
	stamp := fs.Bool("stamp", false, "print the start stamp (date, load average) to add to a run's output, and exit")
	strict := fs.Bool("strict", false, "exit 1 when a goal is not met")
	proc := fs.String("proc", "/proc", "where the machine's facts are read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *stamp {
		// The commit measured is the one at the start: a run takes minutes.
		commit, dirty := gitCommit(filepath.Dir(*goalsPath))
		fmt.Fprintf(stdout, "conch-bench: start %s\nconch-bench: load-start %s\nconch-bench: commit %s\nconch-bench: dirty %t\n",
			time.Now().UTC().Format("2006-01-02 15:04 MST"), benchtable.ReadLoad(*proc), commit, dirty)
		return nil
	}
	if _, ok := benchtable.Headings[*section]; !ok {
		return fmt.Errorf("unknown section %q (bench or soak)", *section)
	}
	gf, err := os.ReadFile(*goalsPath)
	if err != nil {
		return err
	}
	goals, err := benchtable.ReadGoals(bytes.NewReader(gf))
	if err != nil {
		return fmt.Errorf("%s: %w", *goalsPath, err)
	}

	var in io.Reader = stdin
	raw := ""
	if fs.NArg() > 0 {
		var rs []io.Reader
		for _, p := range fs.Args() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			rs = append(rs, f)
		}
		in = io.MultiReader(rs...)
		raw = strings.Join(fs.Args(), ", ")
	}
	out, err := benchtable.Parse(in)
	if err != nil {
		return err
	}
	rows := benchtable.Evaluate(goals, *section, out)
	fmt.Fprint(stdout, "\n"+benchtable.Text(rows))

	r := benchtable.Run{
		Date:      out.Stamps["start"],
		Machine:   benchtable.ReadMachine(*proc),
		LoadStart: out.Stamps["load-start"],
		Go:        runtime.Version(),
		Raw:       raw,
		Failed:    out.Failed,
	}
	if r.Date == "" {
		r.Date = time.Now().UTC().Format("2006-01-02 15:04 MST")
	}
	if c := out.Stamps["commit"]; c != "" {
		r.Commit, r.Dirty = c, out.Stamps["dirty"] == "true"
	} else {
		r.Commit, r.Dirty = gitCommit(filepath.Dir(*goalsPath))
	}
	if *docPath != "" {
		doc, err := os.ReadFile(*docPath)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		next, err := benchtable.ReplaceSection(string(doc), *section, r.Header()+"\n"+benchtable.Markdown(rows))
		if err != nil {
			return fmt.Errorf("%s: %w", *docPath, err)
		}
		if err := writeFile(*docPath, []byte(next)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "written to %s (section %q)\n", *docPath, benchtable.Headings[*section])
	}
	if met, total := benchtable.Summary(rows); *strict && met < total {
		return fmt.Errorf("%d of %d goals not met", total-met, total)
	}
	return nil
}

// gitCommit is the commit of the tree dir is in and whether it has
// uncommitted changes besides docs/performance.md (which a run writes);
// "" when git cannot say.
func gitCommit(dir string) (string, bool) {
	head, err := exec.Command("git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "", false
	}
	st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no",
		"--", ":(top)", ":(top,exclude)docs/performance.md").Output()
	return strings.TrimSpace(string(head)), err == nil && len(bytes.TrimSpace(st)) > 0
}

// writeFile replaces path atomically (temporary file + rename), keeping its mode.
func writeFile(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".benchtable-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
