package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// makeLifeboat builds the binary with the Makefile's own rule and flags (make lifeboat) into
// a temporary directory, with extra make variables, and returns its path.
func makeLifeboat(t *testing.T, vars ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	args := append([]string{"-s", "--no-print-directory", "-C", root, "BIN=" + bin, "lifeboat"}, vars...)
	cmd := exec.Command("make", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return filepath.Join(bin, "lifeboat")
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", filepath.Join("..", "..")}, args...)...).Output()
	if err != nil {
		t.Skipf("not a git checkout (git %s: %v)", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

func versionOf(t *testing.T, binary string) string {
	t.Helper()
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", binary, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestMakeBuild: `make lifeboat` stamps the commit it builds and that commit's time, read
// from git (the toolchain records no revision with -buildvcs=false); the binary needs no
// dynamic loader (it runs in an image without libc) and holds no path of the build machine.
func TestMakeBuild(t *testing.T) {
	before, beforeTime := git(t, "rev-parse", "HEAD"), git(t, "log", "-1", "--format=%cI")
	binary := makeLifeboat(t)
	after, afterTime := git(t, "rev-parse", "HEAD"), git(t, "log", "-1", "--format=%cI")

	t.Run("version names the commit", func(t *testing.T) {
		got := versionOf(t, binary)
		// Another commit may land while it builds: either one is right.
		if !strings.Contains(got, " commit "+before+" committed "+beforeTime+" ") && !strings.Contains(got, " commit "+after+" committed "+afterTime+" ") {
			t.Errorf("lifeboat version = %q, want commit %s committed %s", got, after, afterTime)
		}
		if strings.HasPrefix(got, "lifeboat dev ") {
			t.Errorf("lifeboat version = %q, want the version git describe names", got)
		}
		if !strings.Contains(got, runtime.Version()) {
			t.Errorf("lifeboat version = %q, want the Go version %s", got, runtime.Version())
		}
	})

	t.Run("static", func(t *testing.T) {
		f, err := elf.Open(binary)
		if err != nil {
			t.Fatalf("open %s as ELF: %v", binary, err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("program header %s: the binary is dynamically linked", p.Type)
			}
		}
		if s := f.Section(".dynamic"); s != nil {
			t.Errorf("the binary has a .dynamic section")
		}
	})

	t.Run("trimpath", func(t *testing.T) {
		info, err := buildinfo.ReadFile(binary)
		if err != nil {
			t.Fatalf("build info of %s: %v", binary, err)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		for k, want := range map[string]string{"-trimpath": "true", "CGO_ENABLED": "0"} {
			if settings[k] != want {
				t.Errorf("build setting %s = %q, want %q", k, settings[k], want)
			}
		}
		data, err := os.ReadFile(binary)
		if err != nil {
			t.Fatal(err)
		}
		root, _ := filepath.Abs(filepath.Join("..", ".."))
		goroot, _ := exec.Command("go", "env", "GOROOT").Output()
		for _, dir := range []string{root, strings.TrimSpace(string(goroot)), os.Getenv("HOME")} {
			if dir != "" && dir != "/" && bytes.Contains(data, []byte(dir+"/")) {
				t.Errorf("the binary contains the build machine's path %s", dir)
			}
		}
	})
}

// TestMakeBuildWithoutGit: a source tree without git still builds, and says what it does not
// know; values given to make win. (Only the link differs from TestMakeBuild's build.)
func TestMakeBuildWithoutGit(t *testing.T) {
	noGit := "GIT=" + filepath.Join(t.TempDir(), "no-git")
	binary := makeLifeboat(t, noGit)
	if got, want := versionOf(t, binary), "lifeboat dev commit unknown committed unknown "; !strings.HasPrefix(got, want) {
		t.Errorf("lifeboat version = %q, want it to start with %q", got, want)
	}
	binary = makeLifeboat(t, noGit, "VERSION=v1.2.3", "COMMIT=0123456789abcdef0123456789abcdef01234567", "COMMIT_TIME=2026-01-02T03:04:05Z")
	if got, want := versionOf(t, binary), "lifeboat v1.2.3 commit 0123456789abcdef0123456789abcdef01234567 committed 2026-01-02T03:04:05Z "; !strings.HasPrefix(got, want) {
		t.Errorf("lifeboat version = %q, want it to start with %q", got, want)
	}
}

// TestToolchainIsCIs: go.mod's toolchain line names the Go that runs the tests (CI runs them
// with GOTOOLCHAIN=local), so a build elsewhere picks the same compiler and standard library.
func TestToolchainIsCIs(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	toolchain := ""
	for s := bufio.NewScanner(f); s.Scan(); {
		if v, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "toolchain "); ok {
			toolchain = strings.TrimSpace(v)
		}
	}
	if toolchain != runtime.Version() {
		t.Errorf("go.mod's toolchain line is %q, want %q (the Go running the tests, as CI does); update the line when CI's Go changes", toolchain, runtime.Version())
	}
}

// maxBinaryBytes bounds the stripped binary (make lifeboat). It is about 37 MB; past the bound
// something made the linker keep far more than Lifeboat uses (docs/design/template-evaluator.md).
const maxBinaryBytes = 48 << 20

// TestLinkerKeepsOnlyWhatIsCalled guards the reason the webhook evaluator exists: once any
// code in the binary can look a method up by name at run time (text/template's Execute does,
// with reflect.Value.MethodByName), the linker keeps every exported method of every linked
// type, and each of the EC2 client's hundreds of operations comes back. The EC2 operations
// Lifeboat never calls must be absent from the binary (a stripped binary still names its
// functions, for stack traces), and the binary within maxBinaryBytes.
func TestLinkerKeepsOnlyWhatIsCalled(t *testing.T) {
	binary := makeLifeboat(t)
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	operation := regexp.MustCompile(`service/ec2\.\(\*Client\)\.([A-Z][A-Za-z0-9]*)`)
	linked := map[string]bool{}
	for _, m := range operation.FindAllSubmatch(data, -1) {
		linked[string(m[1])] = true
	}
	if len(linked) == 0 {
		t.Fatal("no EC2 client operation found in the binary: the names changed, so this check checks nothing")
	}
	called := map[string]bool{"DescribeInstances": true, "DescribeInstanceStatus": true, "TerminateInstances": true, "Options": true}
	for op := range linked {
		if !called[op] {
			t.Errorf("the binary keeps EC2 operation %s, which Lifeboat never calls: something looks methods up by name (see docs/design/template-evaluator.md)", op)
		}
	}
	t.Logf("EC2 operations linked: %d; binary: %.1f MB", len(linked), float64(len(data))/1e6)
	if len(data) > maxBinaryBytes {
		t.Errorf("the binary is %d bytes, more than %d (docs/design/template-evaluator.md)", len(data), maxBinaryBytes)
	}
}
