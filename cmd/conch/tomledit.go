package main

import (
	"strconv"
	"strings"
)

// tomlDoc edits a conch.toml in place, line by line, so that `conch init`
// run again changes only the keys it sets: comments, blank lines, key order
// and every key it does not know stay as they were. It understands what
// conch.toml uses: [table] headers (arrays of tables [[...]] are kept and
// never edited), key = value lines and comments.
type tomlDoc struct {
	lines []string
}

func parseTOMLDoc(text string) *tomlDoc {
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return &tomlDoc{}
	}
	return &tomlDoc{lines: strings.Split(text, "\n")}
}

func (d *tomlDoc) String() string { return strings.Join(d.lines, "\n") + "\n" }

// tableOf returns the table a header line opens ("" if it is none; "[[x]]"
// for an array of tables, which set never edits).
func tableOf(line string) (string, bool) {
	t := strings.TrimSpace(line)
	if strings.HasPrefix(t, "[[") {
		return "[[" + strings.TrimSpace(strings.Trim(t, "[]")) + "]]", true
	}
	if strings.HasPrefix(t, "[") {
		end := strings.Index(t, "]")
		if end > 0 {
			return strings.TrimSpace(t[1:end]), true
		}
	}
	return "", false
}

// keyOf returns the key a key = value line sets.
func keyOf(line string) (string, bool) {
	t := strings.TrimSpace(line)
	if t == "" || t[0] == '#' {
		return "", false
	}
	k, _, ok := strings.Cut(t, "=")
	if !ok {
		return "", false
	}
	return strings.Trim(strings.TrimSpace(k), `"`), true
}

// get returns the raw value of table.key ("" table: the top level).
func (d *tomlDoc) get(table, key string) (string, bool) {
	cur := ""
	for _, l := range d.lines {
		if t, ok := tableOf(l); ok {
			cur = t
			continue
		}
		if k, ok := keyOf(l); ok && cur == table && k == key {
			_, v, _ := strings.Cut(l, "=")
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// set sets table.key to value (a TOML literal: use tomlString for text). An
// existing line is rewritten (its trailing comment is dropped with the old
// value); a new key goes after the table's last key line, and a missing
// table is appended at the end with comment as its first line.
func (d *tomlDoc) set(table, key, value, comment string) {
	cur := ""
	lastInTable := -1
	tableLine := -1
	for i, l := range d.lines {
		if t, ok := tableOf(l); ok {
			cur = t
			if t == table {
				tableLine, lastInTable = i, i
			}
			continue
		}
		if cur != table {
			continue
		}
		if k, ok := keyOf(l); ok {
			if k == key {
				indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
				d.lines[i] = indent + key + " = " + value
				return
			}
			lastInTable = i
		}
	}
	line := key + " = " + value
	switch {
	case table == "" && lastInTable >= 0:
		d.insert(lastInTable+1, line)
	case table == "":
		// top-level keys go before the first table
		at := 0
		for at < len(d.lines) {
			if _, ok := tableOf(d.lines[at]); ok {
				break
			}
			at++
		}
		d.insert(at, line)
	case tableLine >= 0:
		d.insert(lastInTable+1, line)
	default:
		if len(d.lines) > 0 && strings.TrimSpace(d.lines[len(d.lines)-1]) != "" {
			d.lines = append(d.lines, "")
		}
		d.lines = append(d.lines, "["+table+"]")
		if comment != "" {
			for _, c := range strings.Split(comment, "\n") {
				d.lines = append(d.lines, "# "+c)
			}
		}
		d.lines = append(d.lines, line)
	}
}

func (d *tomlDoc) insert(at int, line string) {
	d.lines = append(d.lines, "")
	copy(d.lines[at+1:], d.lines[at:])
	d.lines[at] = line
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string { return strconv.Quote(s) }

// tomlStrings is a TOML array of strings.
func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// unquote reads back a value tomlString wrote ("" if it is not a string).
func unquote(raw string) string {
	if i := strings.Index(raw, " #"); i > 0 && strings.Count(raw[:i], `"`)%2 == 0 {
		raw = strings.TrimSpace(raw[:i])
	}
	s, err := strconv.Unquote(raw)
	if err != nil {
		return ""
	}
	return s
}
