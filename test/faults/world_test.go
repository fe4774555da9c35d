// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

const (
	workNS = "work"
	// holdFinalizer keeps an evicted pod terminating until the test lets it go, so a drain
	// lasts as long as a scenario needs.
	holdFinalizer = "lifeboat.dev/faults-hold"
)

// world is a sandbox cluster (with an audit log) shared by a test's scenarios; each scenario
// takes fresh nodes from it.
type world struct {
	c   *sandbox.Cluster
	dir string

	mu       sync.Mutex
	nextNode int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	c := sandboxtest.Cluster(t, sandbox.ClusterOptions{AuditLog: true})
	if err := c.EnsureNamespace(context.Background(), workNS); err != nil {
		t.Fatal(err)
	}
	return &world{c: c, dir: sandboxtest.Dir(t)}
}

// addNodes creates n fresh Ready nodes.
func (w *world) addNodes(t testing.TB, n int) []*corev1.Node {
	t.Helper()
	w.mu.Lock()
	specs := make([]sandbox.NodeSpec, n)
	for i := range specs {
		w.nextNode++
		specs[i] = sandbox.NodeSpec{Index: w.nextNode}
	}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes, err := w.c.AddNodes(ctx, specs...)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// podSpec is a workload pod: held ones stay terminating after their eviction until released;
// critical ones are drained last.
type podSpec struct {
	hold, critical bool
}

// addPods creates ReplicaSet-owned pods on the node and returns their "namespace/name".
func (w *world) addPods(t testing.TB, node *corev1.Node, specs ...podSpec) []string {
	t.Helper()
	var names []string
	for i, s := range specs {
		name := fmt.Sprintf("%s-%d", shortName(node), i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: workNS, Name: name,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app",
					UID: types.UID("rs-" + shortName(node)), Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		}
		if s.hold {
			p.Finalizers = []string{holdFinalizer}
		}
		if s.critical {
			p.Spec.PriorityClassName = "system-cluster-critical"
		}
		if _, err := w.c.Client.CoreV1().Pods(workNS).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, workNS+"/"+name)
	}
	return names
}

// shortName is the node name's distinctive part: ip-10-0-0-7.ec2.internal -> ip-10-0-0-7.
func shortName(n *corev1.Node) string {
	name := n.Name
	for i, r := range name {
		if r == '.' {
			return name[:i]
		}
	}
	return name
}

// releaseHeld lets the node's held pods finish terminating.
func (w *world) releaseHeld(ctx context.Context, node string) error {
	pods, err := w.c.Client.CoreV1().Pods(workNS).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if !slices.Contains(p.Finalizers, holdFinalizer) {
			continue
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		_, err := w.c.Client.CoreV1().Pods(workNS).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("release pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// podsOn lists the names of the pods still on the node.
func (w *world) podsOn(ctx context.Context, node string) ([]string, error) {
	pods, err := w.c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return names, nil
}

// record reads the node's Lifeboat record (a quorum read).
func (w *world) record(ctx context.Context, node string) (record.Record, error) {
	n, err := w.c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return record.Record{}, err
	}
	return record.Read(n)
}

// waitDrained waits until the node's record says drained; it reports whether it did.
func (w *world) waitDrained(ctx context.Context, node string, timeout time.Duration) bool {
	return waitFor(ctx, timeout, func() bool {
		r, err := w.record(ctx, node)
		return err == nil && r.Phase == record.PhaseDrained
	})
}

// kubeconfig writes a kubeconfig for a user of its own (system:masters), so the audit log
// tells that process's requests apart.
func (w *world) kubeconfig(t testing.TB, user string) string {
	t.Helper()
	rc, err := w.c.UserConfig(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(w.dir, user+".kubeconfig")
	if err := w.c.WriteKubeconfig(path, rc); err != nil {
		t.Fatal(err)
	}
	return path
}

// audit returns the user's requests so far.
func (w *world) audit(t testing.TB, user string) []sandbox.AuditEvent {
	t.Helper()
	events, err := w.c.AuditEvents(sandbox.ByUser(user))
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// checkEvictions fails the test unless each pod was evicted by user exactly once and nothing
// else was (an eviction a kill cut off counts when the server carried it out); a pod that was
// not says what every client asked of it, from the audit log.
func (w *world) checkEvictions(t testing.TB, user string, pods []string) {
	t.Helper()
	all, err := w.c.AuditEvents(nil)
	if err != nil {
		t.Fatal(err)
	}
	evictions := EvictionsCarriedOut(all, user)
	for _, p := range pods {
		if n := evictions[p]; n != 1 {
			t.Errorf("pod %s evicted %d times, want exactly 1; requests about it: %s", p, n, w.podRequests(t, p))
		}
	}
	for p, n := range evictions {
		if !slices.Contains(pods, p) {
			t.Errorf("pod %s, not one of the scenario's, evicted %d times", p, n)
		}
	}
}

// podRequests lists the audit log's requests about one pod (namespace/name), by any user.
func (w *world) podRequests(t testing.TB, pod string) string {
	t.Helper()
	events, err := w.c.AuditEvents(func(e sandbox.AuditEvent) bool {
		return e.ObjectRef != nil && e.ObjectRef.Resource == "pods" && e.ObjectRef.Namespace+"/"+e.ObjectRef.Name == pod
	})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range events {
		code := 0
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s %s %d at %s", e.User.Username, e.Verb, e.ObjectRef.Resource, e.ObjectRef.Subresource, e.Stage, code,
			e.StageTimestamp.Format("15:04:05.000")))
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// stage describes how far a node's drain had come, for the log of where kills landed.
func (w *world) stage(ctx context.Context, nodes []string, evicted int) string {
	out := ""
	for _, n := range nodes {
		r, err := w.record(ctx, n)
		phase := r.Phase.String()
		if err != nil {
			phase = "unknown"
		} else if phase == "" {
			phase = "untouched"
		}
		if out != "" {
			out += ","
		}
		out += phase
	}
	return fmt.Sprintf("%s, %d evicted", out, evicted)
}
