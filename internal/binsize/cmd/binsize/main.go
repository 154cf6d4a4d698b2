// Command binsize builds conch as a release does and prints what its stripped
// binary is made of: the size, then the largest modules and packages as
// Markdown tables (the "Binary size" section of docs/performance.md).
//
//	go run ./internal/binsize/cmd/binsize            # 15 largest modules and packages
//	go run ./internal/binsize/cmd/binsize -n 30 -tags kubernetes
//	go run ./internal/binsize/cmd/binsize -bin old   # two binaries built before (old, old.stripped)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"

	"conch/internal/binsize"
)

func main() {
	n := flag.Int("n", 15, "rows per table")
	tags := flag.String("tags", "", "build tags added to the release's (comma-separated)")
	pkg := flag.String("pkg", "./cmd/conch", "the main package to build")
	bin := flag.String("bin", "", "measure BIN (unstripped) and BIN.stripped instead of building")
	flag.Parse()
	if err := run(*n, *tags, *pkg, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "binsize:", err)
		os.Exit(1)
	}
}

func run(n int, tags, pkg, bin string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	unstripped, stripped := bin, bin+".stripped"
	if bin == "" {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			return fmt.Errorf("go env GOMOD: %w", err)
		}
		dir := filepath.Dir(strings.TrimSpace(string(gomod)))
		tmp, err := os.MkdirTemp("", "binsize")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		unstripped, stripped = filepath.Join(tmp, "conch"), filepath.Join(tmp, "conch.stripped")
		var extra []string
		if tags != "" {
			extra = strings.Split(tags, ",")
		}
		for _, b := range []struct {
			out   string
			strip bool
		}{{unstripped, false}, {stripped, true}} {
			if err := binsize.Build(ctx, dir, pkg, b.out, b.strip, extra...); err != nil {
				return err
			}
		}
	}
	r, err := binsize.Attribute(unstripped, stripped)
	if err != nil {
		return err
	}
	fmt.Printf("stripped release binary: %.2f MB (%d bytes); %.2f MB named by symbols, the rest shared out by code size\n\n",
		binsize.MB(r.File), r.File, binsize.MB(r.Symbols))
	if err := binsize.Table(os.Stdout, "module", r.Modules, r.File, n); err != nil {
		return err
	}
	fmt.Println()
	return binsize.Table(os.Stdout, "package", r.Packages, r.File, n)
}
