package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"conch/coders"
	"conch/npmpin"
)

// AgentsDir is where the coding-agent CLIs (and other pinned npm
// packages) are installed in a derived image, one directory per package
// (root owned, read-only at run time).
const AgentsDir = npmpin.Dir

// BinDir holds the commands the CLIs are started by (symlinks or small sh
// wrappers), on the image's PATH.
const BinDir = npmpin.BinDir

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
type Tarball = npmpin.Tarball

// Agent is one command installed in a derived image from pinned tarballs:
// a coding-agent CLI (coders.CLI.Install) or any other pinned package.
type Agent = npmpin.Install

// File is a small file laid into a derived image, root owned, mode 0644.
type File = npmpin.File

// DefaultRegistry is the npm registry the tarballs come from.
const DefaultRegistry = npmpin.DefaultRegistry

// AgentsOf returns the image installs of a table's CLIs, in its order.
func AgentsOf(t coders.Table) []Agent {
	out := make([]Agent, len(t))
	for i, c := range t {
		out[i] = c.Install()
	}
	return out
}

// AgentNames lists the known agents (coders.Builtin) in their canonical
// order.
func AgentNames() []string { return coders.Builtin().Names() }

// LookupAgents returns the pinned agents of names among the built-in CLIs
// (coders.Builtin), as LookupAgentsIn.
func LookupAgents(names []string) ([]Agent, error) {
	return LookupAgentsIn(AgentsOf(coders.Builtin()), names)
}

// LookupAgentsIn returns the installs of names among known, in known's
// order, without repeats. An unknown name is an error naming the known
// ones.
func LookupAgentsIn(known []Agent, names []string) ([]Agent, error) {
	order := make([]string, len(known))
	for i, a := range known {
		order[i] = a.Name
	}
	var out []Agent
	for _, n := range names {
		n = strings.TrimSpace(n)
		i := slices.Index(order, n)
		if i < 0 {
			return nil, fmt.Errorf("unknown coding agent %q (known: %s)", n, strings.Join(order, ", "))
		}
		if !slices.ContainsFunc(out, func(a Agent) bool { return a.Name == n }) {
			out = append(out, known[i].Clone())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return slices.Index(order, out[i].Name) < slices.Index(order, out[j].Name)
	})
	return out, nil
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

// AgentsContainerfile renders Containerfile.agents from the built-in CLIs'
// pins (AgentsContainerfileFor).
func AgentsContainerfile() ([]byte, error) {
	return AgentsContainerfileFor(AgentsOf(coders.Builtin()))
}

// AgentsContainerfileFor renders Containerfile.agents from all: the same
// layout as the offline derived build, for users with a registry. The file
// beside this one is its output (a test checks; `go test ./images/sandbox
// -run TestAgentsContainerfile -update` rewrites it).
func AgentsContainerfileFor(all []Agent) ([]byte, error) {
	var b strings.Builder
	b.WriteString(`# Generated from coders/coders.go (the pins) by
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
