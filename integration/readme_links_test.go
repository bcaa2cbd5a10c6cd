package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// markdownLink matches an inline link's target: [text](target).
var markdownLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)

// docLinks returns the link targets of a Markdown text, leaving out fenced
// code blocks and inline code spans, where brackets are not links.
func docLinks(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range markdownLink.FindAllStringSubmatch(withoutCodeSpans(line), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// withoutCodeSpans blanks the `…` spans of a line.
func withoutCodeSpans(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		if i == len(parts)-1 {
			break // an unclosed backtick is text
		}
		parts[i] = ""
	}
	return strings.Join(parts, "`")
}

// headingAnchor returns the anchor GitHub gives a heading's text: lower
// case, letters, digits, '_' and '-' kept, spaces made '-', the rest
// (punctuation, backticks) dropped.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// docAnchors returns the anchors of a Markdown text's headings, with
// GitHub's -1, -2 … suffixes for repeated ones.
func docAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := headingAnchor(title)
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// TestDocsLinks: every relative link of README.md and docs/*.md names a
// file that exists, and a link with a #fragment into a Markdown file
// names one of its headings, so moving a section or a page cannot leave a
// reader at a dead link.
func TestDocsLinks(t *testing.T) {
	root := moduleRoot()
	anchors := map[string]map[string]bool{} // by absolute path
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	checked := 0
	for _, file := range docFiles(t) {
		from := filepath.Join(root, file)
		for _, link := range docLinks(read(from)) {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(link, "#")
			target := from
			if path != "" {
				target = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
			}
			info, err := os.Stat(target)
			if err != nil {
				t.Errorf("%s: link %q: %v", file, link, err)
				continue
			}
			checked++
			if frag == "" || info.IsDir() || !strings.HasSuffix(target, ".md") {
				continue
			}
			if anchors[target] == nil {
				anchors[target] = docAnchors(read(target))
			}
			if !anchors[target][frag] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", file, link, filepath.Base(target), frag)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links checked: is the link pattern broken?", checked)
	}
}

// TestDocLinkParsing pins what TestDocsLinks reads as a link and as a
// heading's anchor.
func TestDocLinkParsing(t *testing.T) {
	links := []struct {
		name, text string
		want       []string
	}{
		{"relative page", "see [limits](limits.md) and [api](api.md#headers)", []string{"limits.md", "api.md#headers"}},
		{"absolute URL kept for the caller to skip", "[Caddy](https://caddyserver.com)", []string{"https://caddyserver.com"}},
		{"fenced block ignored", "```sh\n[x](nope.md)\n```\n[y](yes.md)", []string{"yes.md"}},
		{"code span ignored", "`[x](nope.md)` then [y](yes.md)", []string{"yes.md"}},
		{"unclosed backtick is text", "a ` b [y](yes.md)", []string{"yes.md"}},
		{"no link", "plain [brackets] and (parens)", nil},
	}
	for _, tt := range links {
		t.Run(tt.name, func(t *testing.T) {
			got := docLinks(tt.text)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("docLinks = %q, want %q", got, tt.want)
			}
		})
	}
	headings := []struct{ heading, want string }{
		{"Global option `llm` (the control plane)", "global-option-llm-the-control-plane"},
		{"Redacting secrets from Caddy's logs: the `llm_secrets` log encoder", "redacting-secrets-from-caddys-logs-the-llm_secrets-log-encoder"},
		{"Inheritance, retries, timeouts and circuit breakers", "inheritance-retries-timeouts-and-circuit-breakers"},
		{"Base URLs and custom_host", "base-urls-and-custom_host"},
	}
	for _, tt := range headings {
		if got := headingAnchor(tt.heading); got != tt.want {
			t.Errorf("headingAnchor(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
	if a := docAnchors("# A\n## Metrics\n```\n# not a heading\n```\n### Metrics\n"); !a["a"] || !a["metrics"] || !a["metrics-1"] || a["not-a-heading"] {
		t.Errorf("docAnchors = %v, want a, metrics, metrics-1 and no fenced line", a)
	}
}
