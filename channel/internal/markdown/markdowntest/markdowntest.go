// Package markdowntest holds the checks the channels' fuzz targets and
// tests share on rendered Markdown. Tests only.
package markdowntest

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// CheckSafeHTML fails when out could run script or load a document: a
// script-capable element, an on*, style, formaction or srcdoc attribute,
// or a javascript:, vbscript: or data: URL. With noImages, an <img> fails
// too.
func CheckSafeHTML(tb testing.TB, out string, noImages bool) {
	tb.Helper()
	if strings.Contains(strings.ToLower(out), "<script") {
		tb.Fatalf("output contains <script: %q", out)
	}
	z := html.NewTokenizer(strings.NewReader(out))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		switch tok.Data {
		case "script", "style", "iframe", "object", "embed", "form", "base", "meta", "link", "svg", "math", "frame", "frameset":
			tb.Fatalf("output has a <%s> element: %q", tok.Data, out)
		case "img":
			if noImages {
				tb.Fatalf("output has an <img> element: %q", out)
			}
		}
		for _, a := range tok.Attr {
			k := strings.ToLower(a.Key)
			if strings.HasPrefix(k, "on") || k == "style" || k == "formaction" || k == "srcdoc" {
				tb.Fatalf("output has a %s attribute on <%s>: %q", k, tok.Data, out)
			}
			if k == "href" || k == "src" || k == "action" || k == "xlink:href" {
				v := strings.ToLower(strings.Map(func(r rune) rune {
					if r <= ' ' {
						return -1
					}
					return r
				}, a.Val))
				for _, bad := range []string{"javascript:", "vbscript:", "data:"} {
					if strings.HasPrefix(v, bad) {
						tb.Fatalf("output has %s=%q on <%s>: %q", k, a.Val, tok.Data, out)
					}
				}
			}
		}
	}
}

// Seeds are Markdown a model (or a prompt injection) might write: the
// fuzz targets' common corpus.
var Seeds = []string{
	"**bold** _it_ `code` [link](https://example.org) ![img](https://example.org/x.png)",
	"<script>alert(1)</script>",
	"<img src=x onerror=alert(1)>",
	"[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) [z](data:text/html,<script>)",
	"<a href=\"&#106;avascript:alert(1)\">x</a>",
	"```go\nfunc main() {}\n```\n\n| a | b |\n|---|---|\n| <b>1</b> | 2 |",
	"- [ ] task\n- [x] done\n\n> quote\n\n1. one\n2. two",
	"<div onclick=\"x\" style=\"background:url(javascript:x)\">hi</div>",
	"<svg><script>alert(1)</script></svg><iframe src=x></iframe><object data=x>",
	"<style>*{}</style><form action=x><input type=text></form><base href=x><meta http-equiv=refresh>",
	"```\n<script>\n```",
	"",
}
