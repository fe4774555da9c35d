// SPDX-License-Identifier: Apache-2.0

package sandboxtest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// while it does not exist), and returns it then. The test fails, saying what it waited for,
// when ctx ends or a minute passes first. A wait on the pod's events, not on a guess of how
// long what the test set in motion takes.
func UntilPod(tb testing.TB, ctx context.Context, client kubernetes.Interface, namespace, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	tb.Helper()
	pods := client.CoreV1().Pods(namespace)
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return pods.Watch(ctx, o)
		},
	}
	var got *corev1.Pod
	until(tb, ctx, lw, &corev1.Pod{}, namespace+"/"+name, what, func(obj runtime.Object) bool {
		got, _ = obj.(*corev1.Pod)
		return cond(got)
	})
	return got
}

// UntilNode follows node name, from its current state on, until cond holds for it, and returns
// it then; see UntilPod.
func UntilNode(tb testing.TB, ctx context.Context, client kubernetes.Interface, name, what string, cond func(*corev1.Node) bool) *corev1.Node {
	tb.Helper()
	nodes := client.CoreV1().Nodes()
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return nodes.Watch(ctx, o)
		},
	}
	var got *corev1.Node
	until(tb, ctx, lw, &corev1.Node{}, name, what, func(obj runtime.Object) bool {
		got, _ = obj.(*corev1.Node)
		return got != nil && cond(got)
	})
	return got
}

// until waits until cond holds for the object of key (nil while it does not exist), as listed
// first and then after each event. A fake clientset ignores field selectors: events of other
// objects are passed over.
func until(tb testing.TB, ctx context.Context, lw cache.ListerWatcher, obj runtime.Object, key, what string, cond func(runtime.Object) bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(ctx, untilPatience)
	defer cancel()
	pre := func(store cache.Store) (bool, error) {
		item, ok, err := store.GetByKey(key)
		if err != nil || !ok {
			return cond(nil), err
		}
		return cond(item.(runtime.Object)), nil
	}
	next := func(ev watch.Event) (bool, error) {
		k, err := cache.MetaNamespaceKeyFunc(ev.Object)
		if err != nil || k != key {
			return false, err
		}
		if ev.Type == watch.Deleted {
			return cond(nil), nil
		}
		return cond(ev.Object), nil
	}
	if _, err := watchtools.UntilWithSync(ctx, lw, obj, pre, next); err != nil {
		tb.Fatalf("waited for %s: %v", what, err)
	}
}
