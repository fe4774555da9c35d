// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/panics/panicstest"
)

// syncBuffer is a log buffer the drain's goroutines write to at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A panic in one of a drain's goroutines fails its own unit, not the process: a pod's
// eviction fails that pod (the others are evicted, and the eviction slot comes back); the
// drain's pod watch fails the drain at once with the panic as its error, rather than leave
// it blind until its deadline; a cut of leaving pods' grace periods ends that cut. Each is
// counted under its site and logged with the stack.
func TestDrainPanicsStayInTheirUnit(t *testing.T) {
	tests := []struct {
		name string
		site string
		// react sets up the fake API server's answers.
		react func(c *fake.Clientset)
		// tighten brings the deadline this close after the evictions, if set.
		tighten time.Duration
		check   func(t *testing.T, res *Result, err error, took time.Duration)
		// last marks the panicking pod not to disrupt, under a reclaim: it leaves last, on a
		// goroutine of its own.
		last bool
	}{{
		name: "a pod's eviction", site: "eviction", react: evictionPanicsOnBad, check: badPodFailed,
	}, {
		name: "a last pod's eviction", site: "eviction", react: evictionPanicsOnBad, check: badPodFailed, last: true,
	}, {
		name: "the drain's pod watch", site: "pod_watch",
		react: func(c *fake.Clientset) {
			acceptEvictions(c)
			c.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) { panic("watch bug") })
		},
		check: func(t *testing.T, _ *Result, err error, took time.Duration) {
			if err == nil || !strings.Contains(err.Error(), "panic in pod_watch: watch bug") {
				t.Errorf("drain error %v, want the watch's panic", err)
			}
			if took > 10*time.Second {
				t.Errorf("the drain took %s, want it failed at once rather than at its deadline", took)
			}
		},
	}, {
		name: "a cut of grace periods", site: "grace_cut", tighten: time.Second,
		react: func(c *fake.Clientset) {
			acceptEvictions(c)
			c.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { panic("delete bug") })
		},
		check: func(t *testing.T, res *Result, err error, _ time.Duration) {
			if err == nil || len(res.Remaining()) != 3 {
				t.Errorf("drain error %v with %d pods left, want the three accepted pods still terminating at the deadline", err, len(res.Remaining()))
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad, terms := newPod("shop", "bad", "node-1", ownedBy("ReplicaSet", "web"), grace(30)), Terms{}
			if tt.last {
				bad, terms = newPod("shop", "bad", "node-1", ownedBy("ReplicaSet", "web"), grace(1), annotated(AnnotationDoNotDisrupt, "true")), Terms{Reclaim: true}
			}
			client := fake.NewClientset(newPod("shop", "good-1", "node-1", ownedBy("ReplicaSet", "web"), grace(30)), bad,
				newPod("shop", "good-2", "node-1", ownedBy("ReplicaSet", "web"), grace(30)))
			tt.react(client)
			count, logs := &panicstest.Counter{}, &syncBuffer{}
			d := New(client, Options{Slots: 2, PodGracePeriod: -1, Panics: count, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			deadline := NewDeadline(time.Now().Add(time.Minute))
			if tt.last {
				deadline = NewDeadline(time.Now().Add(3 * time.Second)) // its turn comes at once
			}
			if tt.tighten > 0 { // once the three evictions are accepted
				accepted := make(chan struct{})
				var n atomic.Int32
				client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if a.GetSubresource() == "eviction" && n.Add(1) == 3 {
						close(accepted)
					}
					return false, nil, nil // answered by the reactors tt.react set
				})
				go func() {
					<-accepted
					deadline.Tighten(time.Now().Add(tt.tighten))
				}()
			}
			start := time.Now()
			res, err := d.DrainUntil(context.Background(), "node-1", deadline, terms)
			tt.check(t, res, err, time.Since(start))
			if n := count.Get(tt.site); n < 1 {
				t.Errorf("%d panics counted under %s, want at least 1", n, tt.site)
			}
			if d.slots.free != 2 {
				t.Errorf("%d of 2 eviction slots free after the drain, want both back", d.slots.free)
			}
			for _, want := range []string{"level=ERROR", "site=" + tt.site, "panics_test.go"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, logs)
				}
			}
		})
	}
}

// evictionPanicsOnBad makes the eviction of pod bad panic, and finds the others gone already.
func evictionPanicsOnBad(c *fake.Clientset) {
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		name := a.(k8stesting.CreateAction).GetObject().(interface{ GetName() string }).GetName()
		if name == "bad" {
			var pods []*Pod
			_ = pods[len(name)] // a bug met on this pod
		}
		return true, nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	})
}

// badPodFailed: pod bad is left, its outcome saying it panicked; the others are gone.
func badPodFailed(t *testing.T, res *Result, err error, _ time.Duration) {
	for _, p := range res.Pods {
		switch {
		case p.Pod.Name == "bad" && !strings.Contains(p.Error, "panic in eviction: runtime error: index out of range"):
			t.Errorf("the panicking pod's outcome says %q, want the panic", p.Error)
		case p.Pod.Name != "bad" && p.GoneAt.IsZero():
			t.Errorf("pod %s not evicted: %q", p.Pod, p.Error)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("drain error %v, want the panicking pod named as left", err)
	}
}

// acceptEvictions makes the fake API server accept every eviction, leaving the pods
// terminating.
func acceptEvictions(c *fake.Clientset) {
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return a.GetSubresource() == "eviction", nil, nil
	})
}
