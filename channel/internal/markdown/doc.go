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
