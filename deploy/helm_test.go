// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// chartDir is the chart, relative to this package's directory (where go test runs).
var chartDir = filepath.Join("chart", "lifeboat")

// helm runs the pinned helm binary with its state kept in a per-test directory.
type helm struct {
	bin string
	env []string
}

// newHelm finds helm among the sandbox tools, skipping the test when they are not built
// (failing under LIFEBOAT_REQUIRE_SANDBOX), as every sandbox test does.
func newHelm(t testing.TB) helm {
	t.Helper()
	bin := sandboxtest.Tools(t).Path("helm")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("LIFEBOAT_REQUIRE_SANDBOX") == "" {
			t.Skipf("helm is not built (%v): run 'make sandbox'", err)
		}
		t.Fatalf("helm is not built: %v", err)
	}
	home := t.TempDir()
	env := append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	return helm{bin: bin, env: env}
}

// run returns helm's standard output, or an error carrying its standard error.
func (h helm) run(args ...string) (string, error) {
	return runTool(context.Background(), h.bin, h.env, args...)
}

// runTool runs a command-line tool and returns its standard output, or an error carrying
// its standard error.
func runTool(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// template renders the chart as release "lifeboat" in kube-system with the given
// --set/--set-json arguments and decodes every object.
func (h helm) template(t testing.TB, args ...string) rendered {
	t.Helper()
	out, err := h.run(append([]string{"template", "lifeboat", chartDir, "--namespace", "kube-system"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatalf("decode rendered chart: %v\n%s", err, out)
	}
	return rendered(objs)
}

// decodeAll decodes a multi-document YAML stream into typed objects.
func decodeAll(stream string) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var objs []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// rendered is the output of helm template.
type rendered []runtime.Object

func objectsOf[T runtime.Object](r rendered) []T {
	var out []T
	for _, o := range r {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// only returns the single object of type T, failing the test unless there is exactly one.
func only[T runtime.Object](t testing.TB, r rendered) T {
	t.Helper()
	objs := objectsOf[T](r)
	if len(objs) != 1 {
		var zero T
		t.Fatalf("rendered %d objects of type %T, want 1", len(objs), zero)
	}
	return objs[0]
}

func (r rendered) daemonSets() []*appsv1.DaemonSet   { return objectsOf[*appsv1.DaemonSet](r) }
func (r rendered) deployments() []*appsv1.Deployment { return objectsOf[*appsv1.Deployment](r) }

// kinds counts the rendered objects by kind.
func (r rendered) kinds() map[string]int {
	out := map[string]int{}
	for _, o := range r {
		kinds, _, err := scheme.Scheme.ObjectKinds(o)
		if err == nil && len(kinds) > 0 {
			out[kinds[0].Kind]++
		}
	}
	return out
}

// container is the Lifeboat container of a pod template.
func container(t testing.TB, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	if len(spec.Containers) != 1 || spec.Containers[0].Name != "lifeboat" {
		t.Fatalf("pod template has containers %v, want one named lifeboat", spec.Containers)
	}
	return spec.Containers[0]
}

// envOf indexes a container's environment by name, failing on duplicates (the later entry
// would silently win in a pod).
func envOf(t testing.TB, c corev1.Container) map[string]corev1.EnvVar {
	t.Helper()
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := out[e.Name]; dup {
			t.Errorf("container %s sets %s twice", c.Name, e.Name)
		}
		out[e.Name] = e
	}
	return out
}
