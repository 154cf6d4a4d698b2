package npmpin

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

// FromLock makes the Install of an npm package and its whole dependency
// tree, pinned by an npm lockfile (package-lock.json, lockfileVersion 2 or
// 3, as `npm install --package-lock-only --ignore-scripts <pkg>@<version>`
// writes it): every package at the version and sha512 integrity the lock
// holds, laid out under Dir/<dir>/ exactly as the lock's node_modules
// paths say (so Node resolves them as npm would), started by the pinned
// Node through a wrapper named name that runs the package's bin (the one
// named bin, or its only one).
//
// Packages with install scripts, links, or os/cpu limits that exclude
// linux x64 are refused or left out: the image is built offline and runs
// nothing at build time.
func FromLock(name, dir, pkg, version, bin string, lock []byte) (Install, error) {
	var l struct {
		LockfileVersion int `json:"lockfileVersion"`
		Packages        map[string]struct {
			Version          string            `json:"version"`
			Resolved         string            `json:"resolved"`
			Integrity        string            `json:"integrity"`
			Link             bool              `json:"link"`
			Dev              bool              `json:"dev"`
			Optional         bool              `json:"optional"`
			HasInstallScript bool              `json:"hasInstallScript"`
			OS               []string          `json:"os"`
			CPU              []string          `json:"cpu"`
			Bin              map[string]string `json:"bin"`
			Name             string            `json:"name"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(lock, &l); err != nil {
		return Install{}, fmt.Errorf("lockfile of %s: %w", pkg, err)
	}
	if l.LockfileVersion < 2 || len(l.Packages) == 0 {
		return Install{}, fmt.Errorf("lockfile of %s: want lockfileVersion 2 or 3 with a \"packages\" map (npm 7 or later)", pkg)
	}
	root, ok := l.Packages["node_modules/"+pkg]
	if !ok {
		return Install{}, fmt.Errorf("lockfile does not hold %s", pkg)
	}
	if root.Version != version {
		return Install{}, fmt.Errorf("lockfile holds %s@%s, not %s", pkg, root.Version, version)
	}
	script := root.Bin[bin]
	if bin == "" {
		if len(root.Bin) != 1 {
			return Install{}, fmt.Errorf("%s@%s has %d commands; name one", pkg, version, len(root.Bin))
		}
		for _, s := range root.Bin {
			script = s
		}
	}
	if script == "" {
		return Install{}, fmt.Errorf("%s@%s has no command %q", pkg, version, bin)
	}
	in := Install{Name: name, Version: version, Tarballs: []Tarball{Node()}}
	keys := make([]string, 0, len(l.Packages))
	for k := range l.Packages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := l.Packages[k]
		if k == "" || p.Dev {
			continue
		}
		if !platformOK(p.OS, "linux") || !platformOK(p.CPU, "x64") {
			if p.Optional {
				continue
			}
			return Install{}, fmt.Errorf("%s needs os %v cpu %v, not linux x64", k, p.OS, p.CPU)
		}
		if p.Link {
			return Install{}, fmt.Errorf("%s is a link in the lockfile; only registry packages can be pinned", k)
		}
		if p.HasInstallScript {
			return Install{}, fmt.Errorf("%s has an install script, which an offline image build cannot run", k)
		}
		i := strings.LastIndex(k, "node_modules/")
		if i < 0 || strings.Contains(k, "..") {
			return Install{}, fmt.Errorf("lockfile entry %q is not under node_modules", k)
		}
		pname := p.Name
		if pname == "" {
			pname = k[i+len("node_modules/"):]
		}
		in.Tarballs = append(in.Tarballs, Tarball{Package: pname, Version: p.Version, Integrity: p.Integrity, From: "package/", Dir: path.Join(dir, k)})
	}
	in.Wrapper = NodeWrapper(path.Join(Dir, dir, "node_modules", pkg, script))
	return in, in.Check()
}

func platformOK(list []string, want string) bool {
	if len(list) == 0 {
		return true
	}
	allowed := false
	for _, v := range list {
		switch {
		case v == "!"+want:
			return false
		case v == want:
			allowed = true
		case strings.HasPrefix(v, "!"):
			allowed = true
		}
	}
	return allowed
}
