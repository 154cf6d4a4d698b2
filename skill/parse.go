// Package skill discovers and validates skills in the Agent Skills format
// (https://agentskills.io/specification): a folder holding SKILL.md — YAML
// front matter with name and description, then Markdown instructions — and
// optionally scripts/, references/ and assets/.
//
// Validation is lenient, as the specification's integration guide advises:
// a skill is skipped (listed as broken, with the reason) only when its
// SKILL.md has no front matter, unparseable YAML, no description, a name
// another skill of the same source already uses, or exceeds a size cap;
// everything else the specification asks for is a warning.
package skill

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"
)

// Limits.
const (
	// MaxSkillFile caps SKILL.md.
	MaxSkillFile = 256 << 10
	// MaxSkillBytes caps all files of one skill together (copied into sandboxes).
	MaxSkillBytes = 16 << 20
	// MaxSkillFiles caps the number of files of one skill.
	MaxSkillFiles = 1000
	maxName       = 64
	maxDesc       = 1024
	maxCompat     = 500
)

// Source says where a skill was found; later sources override earlier ones.
type Source string

// Sources, in increasing precedence.
const (
	SourceBundled   Source = "bundled"
	SourceShared    Source = "shared"    // ~/.agents/skills
	SourceUser      Source = "user"      // $XDG_CONFIG_HOME/conch/skills
	SourceWorkspace Source = "workspace" // /workspace/.agents/skills, when skills.workspace is on
)

// Skill is one discovered skill.
type Skill struct {
	// Name is the skill's identity: its front matter name (or the folder's
	// when that is unusable).
	Name        string
	Description string
	// Optional fields of the specification.
	License       string
	Compatibility string
	Metadata      map[string]string
	AllowedTools  []string
	// Body is the Markdown after the front matter.
	Body string

	Source Source
	// Folder is the directory name the skill was found in.
	Folder string
	// Location is where it was found, for people: a host path, the sandbox
	// path of a workspace skill, or "(built in)".
	Location string
	// Files lists the skill's files relative to its folder (SKILL.md included).
	Files []string
	// Warnings are departures from the specification that do not stop use.
	Warnings []string
	// Broken is why the skill cannot be used; "" when it can.
	Broken string
	// Enabled is the state from the store (default on); meaningless when broken.
	Enabled bool
	// Shadows names the sources of same-named skills this one overrides.
	Shadows []Source

	tree tree
}

// OK reports whether the skill can be used.
func (s Skill) OK() bool { return s.Broken == "" }

var (
	specName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	// safeName is what may become a directory name in a sandbox.
	safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// ValidName reports whether name follows the specification (lowercase
// letters, digits and single hyphens, at most 64 characters).
func ValidName(name string) bool { return len(name) <= maxName && specName.MatchString(name) }

var knownKeys = map[string]bool{"name": true, "description": true, "license": true, "compatibility": true, "metadata": true, "allowed-tools": true}

// Parse reads a SKILL.md found in folder. The result may be broken; it
// never fails.
func Parse(folder string, data []byte) Skill {
	s := Skill{Folder: folder, Name: folder}
	if len(data) > MaxSkillFile {
		s.Broken = fmt.Sprintf("SKILL.md is %d bytes, over the %d-byte cap", len(data), MaxSkillFile)
		return s
	}
	front, body, ok := splitFrontMatter(data)
	if !ok {
		s.Broken = "SKILL.md has no YAML front matter (it must start with a line --- and end it with another)"
		return s
	}
	var raw map[string]any
	if err := yaml.Unmarshal(front, &raw); err != nil {
		// The integration guide's fallback: values with an unquoted ": " are
		// the commonest mistake; quote them and try once more.
		if err2 := yaml.Unmarshal(quoteValues(front), &raw); err2 != nil {
			s.Broken = "the front matter is not valid YAML: " + oneLine(err.Error())
			return s
		}
		s.Warnings = append(s.Warnings, "the front matter is not strictly valid YAML (unquoted colon in a value?); read leniently")
	}
	if raw == nil {
		s.Broken = "the front matter is empty"
		return s
	}
	s.Body = strings.TrimSpace(string(body))
	str := func(key string) string {
		v, ok := raw[key]
		if !ok || v == nil {
			return ""
		}
		if x, ok := v.(string); ok {
			return strings.TrimSpace(x)
		}
		s.Warnings = append(s.Warnings, key+" should be a string")
		return strings.TrimSpace(fmt.Sprint(v))
	}
	s.Description = str("description")
	if s.Description == "" {
		s.Broken = "no description in the front matter (say what the skill does and when to use it)"
		return s
	}
	if n := utf8.RuneCountInString(s.Description); n > maxDesc {
		s.Warnings = append(s.Warnings, fmt.Sprintf("description is %d characters, over the specification's %d", n, maxDesc))
	}
	name := str("name")
	switch {
	case name == "":
		s.Warnings = append(s.Warnings, "no name in the front matter; using the folder name")
		name = folder
	case name != folder:
		s.Warnings = append(s.Warnings, fmt.Sprintf("name %q differs from its folder %q", name, folder))
	}
	if !ValidName(name) {
		s.Warnings = append(s.Warnings, fmt.Sprintf("name %q does not follow the specification (lowercase letters, digits, single hyphens, at most %d characters)", name, maxName))
	}
	if !safeName.MatchString(name) {
		if !safeName.MatchString(folder) {
			s.Broken = fmt.Sprintf("neither the name %q nor the folder %q can name a directory", name, folder)
			return s
		}
		s.Warnings = append(s.Warnings, fmt.Sprintf("name %q is unusable as a directory name; using the folder name", name))
		name = folder
	}
	s.Name = name
	s.License = str("license")
	s.Compatibility = str("compatibility")
	if n := utf8.RuneCountInString(s.Compatibility); n > maxCompat {
		s.Warnings = append(s.Warnings, fmt.Sprintf("compatibility is %d characters, over the specification's %d", n, maxCompat))
	}
	if at := str("allowed-tools"); at != "" {
		s.AllowedTools = strings.Fields(at)
	}
	if md, ok := raw["metadata"]; ok && md != nil {
		m, ok := md.(map[string]any)
		if !ok {
			s.Warnings = append(s.Warnings, "metadata should be a mapping of strings")
		}
		for k, v := range m {
			if s.Metadata == nil {
				s.Metadata = map[string]string{}
			}
			if x, ok := v.(string); ok {
				s.Metadata[k] = x
			} else {
				s.Metadata[k] = fmt.Sprint(v)
			}
		}
	}
	var unknown []string
	for k := range raw {
		if !knownKeys[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		s.Warnings = append(s.Warnings, "unknown front matter field(s): "+strings.Join(unknown, ", "))
	}
	return s
}

// splitFrontMatter cuts "---\n<yaml>\n---\n<body>".
func splitFrontMatter(data []byte) (front, body []byte, ok bool) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	first, rest, found := bytes.Cut(data, []byte("\n"))
	if !found || strings.TrimRight(string(first), " \t") != "---" {
		return nil, nil, false
	}
	for off := 0; off <= len(rest); {
		end := bytes.IndexByte(rest[off:], '\n')
		line := rest[off:]
		next := len(rest) + 1
		if end >= 0 {
			line, next = rest[off:off+end], off+end+1
		}
		if strings.TrimRight(string(line), " \t") == "---" {
			if next > len(rest) {
				return rest[:off], nil, true
			}
			return rest[:off], rest[next:], true
		}
		off = next
	}
	return nil, nil, false
}

var keyLine = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_-]*):[ \t]+(.*)$`)

// quoteValues wraps top-level scalar values that contain ": " in quotes.
func quoteValues(front []byte) []byte {
	lines := strings.Split(string(front), "\n")
	for i, l := range lines {
		m := keyLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		v := strings.TrimSpace(m[2])
		if v == "" || strings.ContainsAny(v[:1], `"'|>[{`) || !strings.Contains(v, ": ") {
			continue
		}
		lines[i] = m[1] + ": " + `"` + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), `"`, `\"`) + `"`
	}
	return []byte(strings.Join(lines, "\n"))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
