// Package binsize measures what conch's release binary is made of: it builds
// the binary as a release does (Build), attributes the bytes of a stripped
// build to the Go packages and modules they come from (Attribute), and prints
// the largest as a Markdown table (Table). `go run ./internal/binsize/cmd/binsize`
// prints the table of docs/performance.md ("Binary size"); a new dependency
// states its cost measured with it (AGENTS.md).
package binsize

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// ReleaseTags are the build tags every release build sets (the Makefile's
// RELEASE_TAGS; TestMakefileAgrees keeps the two equal). grpcnotrace keeps
// gRPC (linked through genai's Google auth) from importing
// golang.org/x/net/trace, whose html/template turns off the linker's dead
// method elimination; conch never turns gRPC tracing on.
const ReleaseTags = "grpcnotrace"

// ReleaseLDFlags are the linker flags of a release without the version stamps.
const ReleaseLDFlags = "-s -w"

// Build builds the package pkg (./cmd/conch) of the module in dir into out as
// a release does: CGO_ENABLED=0, -trimpath, ReleaseTags plus extraTags, and
// with strip the release's -s -w (without it the symbol table stays, for
// Attribute).
func Build(ctx context.Context, dir, pkg, out string, strip bool, extraTags ...string) error {
	tags := strings.Join(append([]string{ReleaseTags}, extraTags...), ",")
	args := []string{"build", "-trimpath", "-tags", tags}
	if strip {
		args = append(args, "-ldflags", ReleaseLDFlags)
	}
	args = append(args, "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return nil
}

// Size is what one package (or module) adds to the stripped binary.
type Size struct {
	Name string
	// Code and Data are the bytes of its own symbols: machine code, and
	// read-only plus initialised data (type descriptors, tables, strings
	// with a symbol of their own).
	Code, Data int64
	// Bytes is its estimated share of the stripped file: Code + Data plus
	// its part of what no symbol names (the pc-value tables of .gopclntab,
	// function metadata, merged strings, ELF overhead), shared out in
	// proportion to Code, which those tables follow.
	Bytes int64
}

// Report is the attribution of one binary.
type Report struct {
	File       int64  // bytes of the stripped binary
	Symbols    int64  // bytes named by a symbol (Code + Data of all packages)
	Packages   []Size // largest first
	Modules    []Size // largest first; "std" is the standard library
	MainModule string
}

// sections whose symbols take room in the file (.bss and .noptrbss do not).
var fileSections = map[string]bool{".text": true, ".rodata": true, ".noptrdata": true, ".data": true, ".typelink": true, ".itablink": true}

// aggregate symbols stand for the runtime's tables of every function or type;
// they are part of the unattributed remainder, not of package runtime.
var aggregate = map[string]bool{
	"runtime.pclntab": true, "runtime.epclntab": true, "runtime.findfunctab": true,
	"runtime.typelink": true, "runtime.itablink": true, "go:func.*": true,
	"runtime.rodata": true, "runtime.erodata": true, "runtime.types": true, "runtime.etypes": true,
	"go:string.*": true, "runtime.noptrdata": true, "runtime.data": true, "runtime.text": true,
}

// Attribute reads the symbols of unstripped (built by Build without strip)
// and shares the size of stripped (the same build with strip) out to
// packages and modules.
func Attribute(unstripped, stripped string) (*Report, error) {
	st, err := os.Stat(stripped)
	if err != nil {
		return nil, err
	}
	f, err := elf.Open(unstripped)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s: %w (built stripped?)", unstripped, err)
	}
	code := map[string]int64{}
	data := map[string]int64{}
	var named int64
	for _, s := range syms {
		if int(s.Section) <= 0 || int(s.Section) >= len(f.Sections) || s.Size == 0 {
			continue
		}
		sec := f.Sections[s.Section]
		if !fileSections[sec.Name] || aggregate[s.Name] {
			continue
		}
		p := PackageOf(s.Name)
		if sec.Name == ".text" {
			code[p] += int64(s.Size)
		} else {
			data[p] += int64(s.Size)
		}
		named += int64(s.Size)
	}
	r := &Report{File: st.Size(), Symbols: named}
	var totalCode int64
	for _, c := range code {
		totalCode += c
	}
	rest := r.File - named
	if rest < 0 {
		rest = 0
	}
	share := func(c, d int64) int64 {
		if totalCode == 0 {
			return c + d
		}
		return c + d + rest*c/totalCode
	}
	pkgs := map[string]bool{}
	for p := range code {
		pkgs[p] = true
	}
	for p := range data {
		pkgs[p] = true
	}
	mods := map[string]*Size{}
	info, err := buildinfo.ReadFile(unstripped)
	if err != nil {
		return nil, err
	}
	r.MainModule = info.Main.Path
	var modPaths []string
	for _, d := range info.Deps {
		modPaths = append(modPaths, d.Path)
	}
	modPaths = append(modPaths, info.Main.Path)
	for p := range pkgs {
		s := Size{Name: p, Code: code[p], Data: data[p], Bytes: share(code[p], data[p])}
		r.Packages = append(r.Packages, s)
		m := moduleOf(p, modPaths)
		if mods[m] == nil {
			mods[m] = &Size{Name: m}
		}
		mods[m].Code += s.Code
		mods[m].Data += s.Data
		mods[m].Bytes += s.Bytes
	}
	for _, m := range mods {
		r.Modules = append(r.Modules, *m)
	}
	byBytes := func(s []Size) {
		sort.Slice(s, func(i, j int) bool {
			if s[i].Bytes != s[j].Bytes {
				return s[i].Bytes > s[j].Bytes
			}
			return s[i].Name < s[j].Name
		})
	}
	byBytes(r.Packages)
	byBytes(r.Modules)
	return r, nil
}

// moduleOf is the longest module path that is p or a prefix of it, "std"
// for the standard library (and the runtime's own symbols).
func moduleOf(p string, mods []string) string {
	best := ""
	for _, m := range mods {
		if (p == m || strings.HasPrefix(p, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	if best == "" {
		return "std"
	}
	return best
}

// PackageOf is the import path of the package a Go linker symbol belongs
// to: "net/http" for "net/http.(*Transport).RoundTrip", "type:*net/http.Header",
// "go:itab.*os.File,io.Reader" or "slices.Sort[go.shape.int]" (the linker
// writes a dot in a path's last element as %2e). A symbol of no package (the
// linker's own) is its whole name up to the first dot.
func PackageOf(sym string) string {
	for _, prefix := range []string{"type:.eq.", "type:.hash.", "type:.namedata.", "type:.importpath.", "type:", "go:itab.", "go:link.", "go:info.", "go:cuinfo.", "go:string.", "go:func."} {
		if strings.HasPrefix(sym, prefix) {
			sym = sym[len(prefix):]
			break
		}
	}
	sym = strings.TrimLeft(sym, "*[]")
	if i := strings.IndexAny(sym, "(["); i >= 0 {
		sym = sym[:i]
	}
	slash := strings.LastIndexByte(sym, '/')
	if dot := strings.IndexByte(sym[slash+1:], '.'); dot >= 0 {
		sym = sym[:slash+1+dot]
	}
	return strings.ReplaceAll(sym, "%2e", ".")
}

// Table writes the n largest rows of sizes as Markdown: name, estimated MB of
// the stripped file (10^6 bytes), share of the file, code and data MB.
func Table(w io.Writer, what string, sizes []Size, file int64, n int) error {
	if _, err := fmt.Fprintf(w, "| %s | MB | share | code MB | data MB |\n|---|---:|---:|---:|---:|\n", what); err != nil {
		return err
	}
	for i, s := range sizes {
		if i == n {
			break
		}
		if _, err := fmt.Fprintf(w, "| `%s` | %.2f | %.1f %% | %.2f | %.2f |\n", s.Name, MB(s.Bytes), 100*float64(s.Bytes)/float64(file), MB(s.Code), MB(s.Data)); err != nil {
			return err
		}
	}
	return nil
}

// MB is bytes in 10^6 bytes, the unit of the binary's goal.
func MB(b int64) float64 { return float64(b) / 1e6 }
