package benchtable

import (
	"fmt"
	"strings"
)

// Headings are the sections' headings in docs/performance.md.
var Headings = map[string]string{
	"bench": "## make bench",
	"soak":  "## make soak",
}

func markers(section string) (begin, end string) {
	return "<!-- benchtable:" + section + ":begin -->", "<!-- benchtable:" + section + ":end -->"
}

// ReplaceSection puts body between the section's markers in doc and returns
// the new document; everything outside the markers stays byte for byte. A
// document without the markers gets the section's heading and the markers
// appended at its end. Markers out of order or repeated are an error: the
// document is not touched.
func ReplaceSection(doc, section, body string) (string, error) {
	begin, end := markers(section)
	nb, ne := strings.Count(doc, begin), strings.Count(doc, end)
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	switch {
	case nb == 0 && ne == 0:
		heading := Headings[section]
		if heading == "" {
			heading = "## " + section
		}
		sep := ""
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			sep = "\n"
		}
		if doc != "" {
			sep += "\n"
		}
		return doc + sep + heading + "\n\n" + begin + "\n" + body + end + "\n", nil
	case nb == 1 && ne == 1:
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if j < i {
			return "", fmt.Errorf("section %s: end marker before begin marker", section)
		}
		return doc[:i+len(begin)] + "\n" + body + doc[j:], nil
	default:
		return "", fmt.Errorf("section %s: %d begin and %d end markers, want one each", section, nb, ne)
	}
}
