// Package markdown is the channels' one Markdown machinery: a reply is
// parsed once (goldmark, GitHub Flavored Markdown) and rendered per target
// (Matrix, email and web HTML through each target's sanitising policy;
// Telegram's small HTML subset and Slack's mrkdwn written from the syntax
// tree; Discord takes the Markdown source), and split at block boundaries
// to each target's limits by one packer. Only packages under channel/
// may import it; each channel keeps a thin call.
package markdown

import (
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// gfm parses every target's Markdown the same way.
var gfm parser.Parser = goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser()

// Doc is one parsed Markdown text.
type Doc struct {
	src  []byte
	root ast.Node
}

// Parse parses Markdown. Bytes that are not UTF-8 become U+FFFD first:
// Telegram refuses such a message, and no target's HTML should carry them
// (tool output shown in progress text may have any bytes).
func Parse(markdown string) *Doc {
	src := []byte(strings.ToValidUTF8(markdown, "\uFFFD"))
	return &Doc{src: src, root: gfm.Parse(text.NewReader(src))}
}

// nodeLines is the source text of a block node's lines.
func nodeLines(src []byte, n ast.Node) string {
	var b strings.Builder
	l := n.Lines()
	for i := 0; i < l.Len(); i++ {
		seg := l.At(i)
		b.Write(seg.Value(src))
	}
	return b.String()
}

// codeSpanText is the literal text inside a code span.
func codeSpanText(src []byte, n *ast.CodeSpan) string {
	var code strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if t, ok := c.(*ast.Text); ok {
			code.Write(t.Segment.Value(src))
		} else if s, ok := c.(*ast.String); ok {
			code.Write(s.Value)
		}
	}
	return code.String()
}
