// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// tracker records which selected pods are gone, and wakes waiters when that changes.
type tracker struct {
	mu      sync.Mutex
	tracked map[types.UID]bool
	gone    map[types.UID]time.Time
	changed chan struct{} // closed and replaced on every change
	// late holds pods the watch saw on the node that the drain did not select: a pod the
	// scheduler bound just before the cordon may arrive after the list. Skipped pods
	// (DaemonSet, mirror) show up here too; the drain's selection sorts them out again.
	late map[types.UID]*Pod
	// leaving holds pods whose eviction or deletion this drain had accepted, and when their
	// grace period lets them end, so a tightened deadline can cut it.
	leaving map[types.UID]leavingPod
	// released holds pods that no longer hold their tier back though they are still on the
	// node: a disruption budget refused their eviction, or it failed.
	released map[types.UID]bool
}

type leavingPod struct {
	pod    *Pod
	endsBy time.Time
}

func newTracker(uids []types.UID) *tracker {
	t := &tracker{tracked: map[types.UID]bool{}, gone: map[types.UID]time.Time{}, changed: make(chan struct{}),
		late: map[types.UID]*Pod{}, leaving: map[types.UID]leavingPod{}, released: map[types.UID]bool{}}
	for _, u := range uids {
		t.tracked[u] = true
	}
	return t
}

// track adds pods the drain selected or waits for.
func (t *tracker) track(uids ...types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, uid := range uids {
		t.tracked[uid] = true
		delete(t.late, uid)
	}
}

// seen records a pod the watch or a list saw on the node; deleted pods are forgotten.
func (t *tracker) seen(pod *Pod, deleted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.tracked[pod.UID]:
	case deleted:
		delete(t.late, pod.UID)
	default:
		t.late[pod.UID] = pod
	}
}

// takeLate returns the untracked pods seen since the last call.
func (t *tracker) takeLate() []*Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Pod, 0, len(t.late))
	for _, p := range t.late {
		out = append(out, p)
	}
	clear(t.late)
	return out
}

// markGone records that the pod is gone, tracked or not yet: a shared informer may report a
// pod's deletion between the drain's list and its selection.
func (t *tracker) markGone(uid types.UID, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, done := t.gone[uid]; done {
		return
	}
	t.gone[uid] = at
	close(t.changed)
	t.changed = make(chan struct{})
}

// release records that the pod, though still on the node, no longer holds its tier back.
func (t *tracker) release(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.released[uid] {
		return
	}
	t.released[uid] = true
	close(t.changed)
	t.changed = make(chan struct{})
}

// markAbsent marks every tracked pod missing from a fresh list as gone.
func (t *tracker) markAbsent(present map[types.UID]bool, at time.Time) {
	t.mu.Lock()
	var missing []types.UID
	for uid := range t.tracked {
		if !present[uid] {
			missing = append(missing, uid)
		}
	}
	t.mu.Unlock()
	for _, uid := range missing {
		t.markGone(uid, at)
	}
}

// leavingBy records that pod's deletion was accepted and that it ends by endsBy at the latest.
func (t *tracker) leavingBy(pod *Pod, endsBy time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leaving[pod.UID] = leavingPod{pod: pod, endsBy: endsBy}
}

// endingAfter returns the leaving pods not yet gone whose grace period ends after by.
func (t *tracker) endingAfter(by time.Time) []*Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*Pod
	for uid, l := range t.leaving {
		if _, gone := t.gone[uid]; !gone && l.endsBy.After(by) {
			out = append(out, l.pod)
		}
	}
	return out
}

func (t *tracker) goneAt(uid types.UID) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.gone[uid]
	return at, ok
}

// waitSettled returns when every uid is gone or released (true), or ctx ends.
func (t *tracker) waitSettled(ctx context.Context, uids []types.UID) (settled bool) {
	for {
		t.mu.Lock()
		left := 0
		for _, u := range uids {
			if _, ok := t.gone[u]; !ok && !t.released[u] {
				left++
			}
		}
		ch := t.changed
		t.mu.Unlock()
		if left == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// waitAll returns when every uid is gone or ctx ends.
func (t *tracker) waitAll(ctx context.Context, uids []types.UID) {
	for {
		t.mu.Lock()
		left := 0
		for _, u := range uids {
			if _, ok := t.gone[u]; !ok {
				left++
			}
		}
		ch := t.changed
		t.mu.Unlock()
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// watchDeletions follows the node's pods from resourceVersion rv and reports deletions to tr
// until ctx ends. One watch serves the whole drain; if it breaks, a fresh list catches what
// was missed and the watch resumes from there.
func (d *Drainer) watchDeletions(ctx context.Context, node, rv string, tr *tracker) {
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		if rv == "" {
			rv = d.relist(ctx, node, tr)
			if rv == "" {
				sleep(ctx, pause)
				pause = min(pause*2, 5*time.Second)
				continue
			}
		}
		w, err := d.client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{
			FieldSelector: selector, ResourceVersion: rv, AllowWatchBookmarks: true,
		})
		if err != nil {
			d.opts.Logger.Debug("pod watch failed; listing again", "node", node, "err", err)
			rv = ""
			sleep(ctx, pause) // a persistent failure must not become a LIST+WATCH loop
			pause = min(pause*2, 5*time.Second)
			continue
		}
		var events int
		rv, events = d.consume(ctx, w, tr, rv)
		w.Stop()
		if events == 0 {
			sleep(ctx, pause)
			pause = min(pause*2, 5*time.Second)
		} else {
			pause = 100 * time.Millisecond
		}
	}
}

// consume reads watch events until the watch ends; it returns the resourceVersion to resume
// from (rv, advanced by the events seen), or "" when a fresh list is needed, and how many
// events it saw.
func (d *Drainer) consume(ctx context.Context, w watch.Interface, tr *tracker, rv string) (string, int) {
	events := 0
	for {
		select {
		case <-ctx.Done():
			return rv, events
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, events
			}
			switch ev.Type {
			case watch.Error:
				// Typically 410 Gone (the version is too old to resume from): list again.
				return "", events
			case watch.Deleted:
				if pod, ok := podOf(ev.Object); ok {
					tr.markGone(pod.UID, time.Now())
					tr.seen(pod, true)
					rv = pod.ResourceVersion
				}
			default:
				if pod, ok := podOf(ev.Object); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					tr.seen(pod, false)
				}
				if obj, ok := ev.Object.(metav1.Object); ok {
					rv = obj.GetResourceVersion()
				}
			}
			events++
		}
	}
}

// relist marks tracked pods absent from a fresh list as gone and returns the list's
// resourceVersion ("" on error).
func (d *Drainer) relist(ctx context.Context, node string, tr *tracker) string {
	pods, rv, err := (APILister{Client: d.client, Quorum: true}).PodsOnNode(ctx, node)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			d.opts.Logger.Debug("pod list failed", "node", node, "err", err)
		}
		return ""
	}
	present := make(map[types.UID]bool, len(pods))
	for _, pod := range pods {
		present[pod.UID] = true
		tr.seen(pod, false)
	}
	tr.markAbsent(present, time.Now())
	return rv
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
