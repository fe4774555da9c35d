// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// codeRef is one dotted code name a page gives: pkg.Name, pkg.Type.Member, path/pkg.Name,
// Type.Member or a file name (drain.go, controller/lease.go); or a path of the repository
// (internal/detach/volumes).
type codeRef struct {
	line                 int
	text                 string // as written
	prefix, name, member string // member only for a third part
	path                 string // a path of the repository, instead of a name
}

var (
	dotted = `((?:[a-z][a-z0-9_]*/)*[A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?`
	// spanName is a whole code span that is a name (a call's () allowed).
	spanName = regexp.MustCompile(`^` + dotted + `(?:\(\))?$`)
	// fenceName is a name anywhere in a fenced block's text.
	fenceName = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])` + dotted)
	// spanPath is a whole code span that is a path under the code's top directories.
	spanPath = regexp.MustCompile(`^(?:internal|cmd|test)(?:/[A-Za-z0-9_.-]+)+$`)
)

// codeRefs reads the names of a Markdown page: the code spans outside fenced blocks that are
// a name as a whole, and every name inside fenced blocks (their diagrams name code without
// backticks).
func codeRefs(page string) []codeRef {
	var out []codeRef
	fence, n := "", 0
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case fence != "" && strings.HasPrefix(trimmed, fence):
			fence = ""
		case fence != "":
			out = append(out, fenceRefs(n, line)...)
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
		default:
			for _, span := range codeSpan.FindAllString(line, -1) {
				text := strings.TrimSpace(strings.Trim(span, "`"))
				if spanPath.MatchString(text) {
					out = append(out, codeRef{line: n, text: "`" + text + "`", path: text})
				} else if m := spanName.FindStringSubmatch(text); m != nil {
					out = append(out, codeRef{line: n, text: "`" + text + "`", prefix: m[1], name: m[2], member: m[3]})
				}
			}
		}
	}
	return out
}

// fenceRefs reads the names of one line of a fenced block. A dotted word that goes on with a
// dot, slash or hyphen (lifeboat.dev/Interruption, a.b.c.d) is not a Go name.
func fenceRefs(n int, line string) []codeRef {
	var out []codeRef
	for _, ix := range fenceName.FindAllStringSubmatchIndex(line, -1) {
		if end := ix[1]; end < len(line) && strings.ContainsRune("./-", rune(line[end])) {
			continue
		}
		r := codeRef{line: n, text: line[ix[2]:ix[1]], prefix: line[ix[2]:ix[3]], name: line[ix[4]:ix[5]]}
		if ix[6] >= 0 {
			r.member = line[ix[6]:ix[7]]
		}
		out = append(out, r)
	}
	return out
}

// externalPackages are the other projects' packages (and the standard library's) the pages
// held strictly may name, by the name the code imports them as. Any other lower-case prefix
// that is neither a package nor a type of Lifeboat is refused there.
var externalPackages = map[string]string{
	"corev1":  "k8s.io/api/core/v1",
	"reflect": "reflect",
}

// fieldRoots start the Kubernetes object field paths the page names (`spec.nodeName`,
// `pod.status.startTime`): API fields, not Go names.
var fieldRoots = map[string]bool{"spec": true, "status": true, "metadata": true, "pod": true}

// fileExts are the endings of file names (`drain.go`, `values.yaml`, `go.mod`,
// `lifeboat.yaml.tmpl`).
var fileExts = map[string]bool{"go": true, "mod": true, "md": true, "yaml": true, "json": true, "sh": true, "svg": true, "tmpl": true, "txt": true}

// codeWorld is what the names are resolved against: the packages of internal/, cmd/ and test/,
// what each declares, and the Go files of the repository.
type codeWorld struct {
	pkgs     map[string][]string        // package name → directories
	decls    map[string]map[string]bool // directory → declared names
	goFiles  []string                   // slash-separated, relative to the repository
	external map[string]map[string]bool // externalPackages' names → declared names, on demand
}

func newCodeWorld(t *testing.T) *codeWorld {
	t.Helper()
	w := &codeWorld{pkgs: goPackages(t, "internal", "cmd", "test"), decls: map[string]map[string]bool{}, external: map[string]map[string]bool{}}
	for _, dirs := range w.pkgs {
		for _, dir := range dirs {
			w.decls[dir] = declared(t, dir)
		}
	}
	for _, top := range []string{"internal", "cmd", "test"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
				rel, _ := filepath.Rel(root, path)
				w.goFiles = append(w.goFiles, filepath.ToSlash(rel))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// isLifeboatName reports whether a name is an exported name of one of Lifeboat's packages
// (by name or path), or a path under internal/, cmd/ or test/: what every page is held to.
func (w *codeWorld) isLifeboatName(r codeRef) bool {
	if r.path != "" {
		return true
	}
	if !unicode.IsUpper(rune(r.name[0])) {
		return false
	}
	if strings.Contains(r.prefix, "/") {
		return len(w.dirsOf(r.prefix)) > 0
	}
	return len(w.pkgs[r.prefix]) > 0
}

// dirsOf lists the package directories a path names: internal/episode/driver, or the path
// under a top directory (episode/driver, source/sqs/messages).
func (w *codeWorld) dirsOf(path string) []string {
	var out []string
	for _, dirs := range w.pkgs {
		for _, dir := range dirs {
			if dir == path || strings.HasSuffix(dir, "/"+path) {
				out = append(out, dir)
			}
		}
	}
	return out
}

// resolve says why a name does not resolve, or "" when it does. strict refuses what it cannot
// place (an unknown lower-case prefix); otherwise such names pass.
func (w *codeWorld) resolve(t *testing.T, r codeRef, strict bool) string {
	switch {
	case r.path != "":
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(r.path))); err != nil {
			return "the repository has no " + r.path
		}
		return ""
	case r.member == "" && fileExts[r.name] || fileExts[r.member]:
		return w.resolveFile(r)
	case strings.Contains(r.prefix, "/"):
		dirs := w.dirsOf(r.prefix)
		if len(dirs) == 0 {
			return "no package of Lifeboat is at " + r.prefix
		}
		return w.resolveIn(r, dirs)
	case len(w.pkgs[r.prefix]) > 0:
		return w.resolveIn(r, w.pkgs[r.prefix])
	case externalPackages[r.prefix] != "":
		return declaresName(w.externalDecls(t, r.prefix), r, externalPackages[r.prefix])
	case !strict || fieldRoots[r.prefix]:
		return ""
	case unicode.IsUpper(rune(r.prefix[0])) || w.isType(r.prefix):
		return w.resolveMember(r)
	}
	return "no package or type of Lifeboat is named " + r.prefix + ", and it is not among the other projects' packages the pages may name (externalPackages)"
}

// isType reports whether some package of Lifeboat declares a type (or another top-level
// name) called name: `ends.release` names a method of the episode's unexported ends.
func (w *codeWorld) isType(name string) bool {
	for _, d := range w.decls {
		if d[name] {
			return true
		}
	}
	return false
}

func (w *codeWorld) resolveIn(r codeRef, dirs []string) string {
	why := ""
	for _, dir := range dirs {
		if why = declaresName(w.decls[dir], r, dir); why == "" {
			return ""
		}
	}
	return why
}

// declaresName: the package declares name (or the type name its member). A lower-case name
// alone may be a method or field of one of its types (`controller.handleNotice`).
func declaresName(decls map[string]bool, r codeRef, where string) string {
	want := r.name
	if r.member != "" {
		want += "." + r.member
	}
	if decls[want] {
		return ""
	}
	if r.member == "" {
		for d := range decls {
			if _, member, ok := strings.Cut(d, "."); ok && member == r.name {
				return ""
			}
		}
	}
	return where + " declares no " + want
}

// resolveMember: Type.Member, a type of some package of Lifeboat with that method or field.
func (w *codeWorld) resolveMember(r codeRef) string {
	if r.member != "" {
		return "a type's member is named as Type.Member or pkg.Type.Member, not with a third part"
	}
	for _, d := range w.decls {
		if d[r.prefix+"."+r.name] {
			return ""
		}
	}
	return "no type " + r.prefix + " of Lifeboat has a method or field " + r.name
}

// resolveFile: a Go file name is that of some file of internal/, cmd/ or test/ (with its
// directories, if given); other files' names pass.
func (w *codeWorld) resolveFile(r codeRef) string {
	if r.name != "go" || r.member != "" {
		return ""
	}
	name := r.prefix + ".go"
	for _, f := range w.goFiles {
		if f == name || strings.HasSuffix(f, "/"+name) {
			return ""
		}
	}
	return "no Go file " + name + " is in internal/, cmd/ or test/"
}

// externalDecls reads what one of externalPackages declares, from the module cache the build
// uses.
func (w *codeWorld) externalDecls(t *testing.T, alias string) map[string]bool {
	t.Helper()
	if d, ok := w.external[alias]; ok {
		return d
	}
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", externalPackages[alias])
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("finding %s (%s) for the names the page gives of it: %v", externalPackages[alias], alias, err)
	}
	w.external[alias] = declared(t, strings.TrimSpace(string(out)))
	return w.external[alias]
}

// TestCodeNameResolution: the reading and resolving of names refuses what does not exist, in
// code spans and in fenced blocks alike, and passes what does.
func TestCodeNameResolution(t *testing.T) {
	w := newCodeWorld(t)
	for page, want := range map[string]string{
		"`nodes.Writer.Apply` and `Handler.Intake()`":                                     "",
		"```\n  ── episode/driver.IntakePolicy, drain.Drainer\n```":                       "",
		"`corev1.Pod`, `spec.nodeName`, `controller.handleNotice`, `controller/lease.go`": "",
		"`lifeboat.dev/Interruption`, `a-b.c`, ```\nlifeboat.dev/Interruption\n```":       "",
		"`nodes.Writer.Nope`":                       "internal/nodes declares no Writer.Nope",
		"```\n   ── handback.Run\n```":              "no package or type of Lifeboat is named handback",
		"~~~\n episode/nope.Run\n~~~":               "no package of Lifeboat is at episode/nope",
		"`corev1.NoSuchType`":                       "declares no NoSuchType",
		"`Handler.Nope`":                            "no type Handler of Lifeboat has a method or field Nope",
		"`nosuchfile.go`":                           "no Go file nosuchfile.go",
		"before\n```\nx\n```\n`handback.Run` after": "no package or type of Lifeboat is named handback",
	} {
		refs := codeRefs(page)
		got := ""
		for _, r := range refs {
			if why := w.resolve(t, r, true); why != "" {
				got = why
			}
		}
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("page %q: got %q, want %q", page, got, want)
		}
	}
}
