// SPDX-License-Identifier: Apache-2.0

package sandboxtest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// untilPatience bounds a wait for something a test has set in motion.
const untilPatience = time.Minute

// UntilPod follows pod namespace/name, from its current state on, until cond holds for it (nil
// once it is gone), and returns it then. The test fails, saying what it waited for, when ctx
// ends or a minute passes first. A wait on the pod's events, not on a guess of how long what
// the test set in motion takes.
func UntilPod(tb testing.TB, ctx context.Context, client kubernetes.Interface, namespace, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	tb.Helper()
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "pods", namespace, fields.OneTermEqualSelector("metadata.name", name))
	var pod *corev1.Pod
	until(tb, ctx, lw, &corev1.Pod{}, what, func(ev watch.Event) bool {
		pod, _ = ev.Object.(*corev1.Pod)
		if ev.Type == watch.Deleted {
			pod = nil
		}
		return cond(pod)
	})
	return pod
}

// UntilNode follows node name, from its current state on, until cond holds for it, and returns
// it then; see UntilPod.
func UntilNode(tb testing.TB, ctx context.Context, client kubernetes.Interface, name, what string, cond func(*corev1.Node) bool) *corev1.Node {
	tb.Helper()
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "nodes", "", fields.OneTermEqualSelector("metadata.name", name))
	var node *corev1.Node
	until(tb, ctx, lw, &corev1.Node{}, what, func(ev watch.Event) bool {
		node, _ = ev.Object.(*corev1.Node)
		return ev.Type != watch.Deleted && node != nil && cond(node)
	})
	return node
}

func until(tb testing.TB, ctx context.Context, lw cache.ListerWatcher, obj runtime.Object, what string, cond func(watch.Event) bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(ctx, untilPatience)
	defer cancel()
	// A precondition sees the object as listed: cond may hold already, or the object may not
	// exist (yet, or any more).
	var absent bool
	pre := func(store cache.Store) (bool, error) {
		if len(store.List()) == 0 {
			absent = true
			return cond(watch.Event{Type: watch.Deleted}), nil
		}
		return cond(watch.Event{Type: watch.Added, Object: store.List()[0].(runtime.Object)}), nil
	}
	next := func(ev watch.Event) (bool, error) { return cond(ev), nil }
	if _, err := watchtools.UntilWithSync(ctx, lw, obj, pre, next); err != nil {
		tb.Fatalf("%s: not seen (absent when the wait began: %v): %v", what, absent, err)
	}
}
