// Command sbom writes a CycloneDX 1.5 JSON software bill of materials for a
// Go binary, offline, from the module list the Go linker embeds in it (the
// same list `go version -m` prints): exactly the modules linked in, with
// their versions, go.sum hashes and replacements, and the Go toolchain.
//
//	go run ./internal/release/sbom -version v0.3.0 dist/conch-linux-amd64/conch > conch.cdx.json
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"
)

func main() {
	version := flag.String("version", "", "the version of the main component (default: the binary's own)")
	date := flag.String("date", "", "RFC 3339 timestamp of the document (default: now; releases pass the commit's date so the file is reproducible)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: sbom [-version V] [-date T] BINARY")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, flag.Arg(0), *version, *date); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, binary, version, date string) error {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("read build info of %s: %w", binary, err)
	}
	sum, err := fileSHA256(binary)
	if err != nil {
		return err
	}
	if date == "" {
		date = time.Now().UTC().Format(time.RFC3339)
	}
	doc, err := document(info, version, date, sum)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// The subset of CycloneDX 1.5 (https://cyclonedx.org/docs/1.5/json/) we fill.
type (
	bom struct {
		BOMFormat    string       `json:"bomFormat"`
		SpecVersion  string       `json:"specVersion"`
		Version      int          `json:"version"`
		Metadata     metadata     `json:"metadata"`
		Components   []component  `json:"components"`
		Dependencies []dependency `json:"dependencies"`
	}
	metadata struct {
		Timestamp string    `json:"timestamp"`
		Tools     tools     `json:"tools"`
		Component component `json:"component"`
	}
	tools struct {
		Components []component `json:"components"`
	}
	component struct {
		Type       string     `json:"type"`
		BOMRef     string     `json:"bom-ref,omitempty"`
		Name       string     `json:"name"`
		Version    string     `json:"version,omitempty"`
		PURL       string     `json:"purl,omitempty"`
		Hashes     []hash     `json:"hashes,omitempty"`
		Properties []property `json:"properties,omitempty"`
	}
	hash struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	}
	property struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	dependency struct {
		Ref       string   `json:"ref"`
		DependsOn []string `json:"dependsOn"`
	}
)

func document(info *buildinfo.BuildInfo, version, date, binarySHA256 string) (*bom, error) {
	if info.Main.Path == "" {
		return nil, errors.New("the binary names no main module")
	}
	if version == "" {
		version = stampedVersion(info)
	}
	main := component{Type: "application", BOMRef: purl(info.Main.Path, version), Name: info.Main.Path, Version: version,
		PURL: purl(info.Main.Path, version), Hashes: []hash{{Alg: "SHA-256", Content: binarySHA256}}}
	for _, s := range info.Settings {
		switch s.Key {
		case "-tags", "-ldflags", "CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "vcs.revision", "vcs.time":
			main.Properties = append(main.Properties, property{Name: "go:build:" + s.Key, Value: s.Value})
		}
	}
	toolchain := component{Type: "application", BOMRef: "pkg:golang/std@" + info.GoVersion, Name: "go", Version: info.GoVersion,
		PURL: "pkg:golang/std@" + info.GoVersion}
	doc := &bom{BOMFormat: "CycloneDX", SpecVersion: "1.5", Version: 1,
		Metadata: metadata{Timestamp: date, Component: main,
			Tools: tools{Components: []component{{Type: "application", Name: "conch/internal/release/sbom"}}}},
		Components: []component{toolchain}}
	deps := []string{toolchain.BOMRef}
	for _, m := range info.Deps {
		c := moduleComponent(m)
		doc.Components = append(doc.Components, c)
		deps = append(deps, c.BOMRef)
	}
	doc.Dependencies = []dependency{{Ref: main.BOMRef, DependsOn: deps}}
	return doc, nil
}

// stampedVersion is the version the linker stamped (-X main.version=...),
// else the main module's.
func stampedVersion(info *buildinfo.BuildInfo) string {
	for _, s := range info.Settings {
		if s.Key != "-ldflags" {
			continue
		}
		for _, f := range strings.Fields(s.Value) {
			if v, ok := strings.CutPrefix(f, "main.version="); ok {
				return v
			}
		}
	}
	return info.Main.Version
}

// moduleComponent describes one linked module; a replaced one keeps its
// required version and says what replaced it.
func moduleComponent(m *debug.Module) component {
	c := component{Type: "library", BOMRef: purl(m.Path, m.Version), Name: m.Path, Version: m.Version, PURL: purl(m.Path, m.Version)}
	if h := goSumHash(m.Sum); h != "" {
		c.Hashes = []hash{{Alg: "SHA-256", Content: h}}
	}
	if r := m.Replace; r != nil {
		v := r.Version
		if v == "(devel)" {
			v = "" // a directory in the repository
		}
		c.Properties = append(c.Properties, property{Name: "go:replace", Value: strings.TrimSpace(r.Path + " " + v)})
		if h := goSumHash(r.Sum); h != "" {
			c.Hashes = []hash{{Alg: "SHA-256", Content: h}}
		}
	}
	return c
}

// goSumHash turns a go.sum "h1:" hash (base64 SHA-256 of the module's file
// list) into hex, as CycloneDX wants.
func goSumHash(sum string) string {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return ""
	}
	return hex.EncodeToString(raw)
}

// purl is the package URL of a Go module (https://github.com/package-url/purl-spec).
func purl(path, version string) string {
	p := "pkg:golang/" + strings.ToLower(path)
	if version != "" {
		p += "@" + version
	}
	return p
}
