// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Link is one inline Markdown link or image found in a file.
type Link struct {
	Line   int
	Target string // as written: a path, #anchor, path#anchor or a URL
}

var (
	// inlineLink matches [text](target) and ![alt](target), with an optional "title".
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan   = regexp.MustCompile("``[^`]*``|`[^`]*`")
	heading    = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// linkText reduces a link inside a heading to its text, as GitHub's slug reads it.
	linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// Parsed is what the checks need of one Markdown file.
type Parsed struct {
	Lines   int
	Links   []Link
	Anchors map[string]bool // heading slugs and explicit <a id> / <a name> anchors
}

// Parse reads Markdown: its links and anchors outside fenced code blocks and code spans.
func Parse(text string) Parsed {
	p := Parsed{Anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		p.Lines++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			p.Anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			slug := Slug(m[2])
			if n := seen[slug]; n > 0 {
				p.Anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				p.Anchors[slug] = true
			}
			seen[slug]++
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			p.Links = append(p.Links, Link{Line: p.Lines, Target: m[1]})
		}
	}
	return p
}

// Slug is the anchor GitHub gives a heading: its text lower-cased, every character but
// letters, marks, digits, underscores, spaces and hyphens dropped, each space a hyphen.
// (A repeated heading's slug gets -1, -2, ...: Parse counts them.)
func Slug(headingText string) string {
	text := linkText.ReplaceAllString(headingText, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// External reports whether a link target leaves the repository (a URL or an e-mail address).
func External(target string) bool {
	return regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`).MatchString(target)
}

// MarkdownFiles lists, relative to root and slash-separated, README.md, deploy/README.md and
// every .md file under docs/.
func MarkdownFiles(root string) ([]string, error) {
	files := []string{"README.md", "deploy/README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// Problem is a link that does not resolve.
type Problem struct {
	File   string
	Line   int
	Target string
	Why    string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: link %q: %s", p.File, p.Line, p.Target, p.Why)
}

// CheckLinks resolves every relative link of the given files (relative to root): the file or
// directory must exist, and an anchor must be a heading or <a id> of the Markdown it names.
func CheckLinks(root string, files []string) ([]Problem, error) {
	parsed := map[string]Parsed{}
	parse := func(rel string) (Parsed, error) {
		if p, ok := parsed[rel]; ok {
			return p, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return Parsed{}, err
		}
		p := Parse(string(b))
		parsed[rel] = p
		return p, nil
	}
	var problems []Problem
	for _, file := range files {
		p, err := parse(file)
		if err != nil {
			return nil, err
		}
		for _, l := range p.Links {
			if External(l.Target) {
				continue
			}
			path, anchor, _ := strings.Cut(l.Target, "#")
			target := file
			if path != "" {
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
				if strings.HasPrefix(target, "../") || filepath.IsAbs(path) {
					problems = append(problems, Problem{file, l.Line, l.Target, "leaves the repository"})
					continue
				}
				info, err := os.Stat(filepath.Join(root, filepath.FromSlash(target)))
				if err != nil {
					problems = append(problems, Problem{file, l.Line, l.Target, "no such file or directory " + target})
					continue
				}
				if info.IsDir() {
					if anchor != "" {
						problems = append(problems, Problem{file, l.Line, l.Target, "an anchor on a directory"})
					}
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			tp, err := parse(target)
			if err != nil {
				return nil, err
			}
			if !tp.Anchors[anchor] {
				problems = append(problems, Problem{file, l.Line, l.Target, "no heading or anchor #" + anchor + " in " + target})
			}
		}
	}
	return problems, nil
}
