// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/panics"
)

// ownGrace is the grace period a pod would be given without a deadline to cut it.
func (d *Drainer) ownGrace(pod *Pod) int64 {
	if d.opts.PodGracePeriod >= 0 {
		return int64(d.opts.PodGracePeriod)
	}
	return podGrace(pod)
}

// shortenOnTighten cuts, each time the deadline moves earlier, the grace period of pods
// already leaving the node that would still be stopping after it. Otherwise the instance
// ends under them, and their objects stay Terminating (holding back a StatefulSet's
// replacement) until the node object is removed. A shorter grace period is the one change
// the API server accepts on a pod already being deleted. Cuts that fail are tried again
// every second. changed is dl.Changed() from before the drain's first eviction. It follows
// the deadline until ctx ends, without a goroutine of its own meanwhile.
func (d *Drainer) shortenOnTighten(ctx context.Context, dl *Deadline, changed <-chan struct{}, tr *tracker) {
	s := &sweeps{sweep: func() (failed int) {
		// A panic ends this sweep only, as one with nothing to try again.
		defer panics.Recover(panics.GraceCut, d.opts.Logger, d.opts.Panics, nil)
		return d.shortenLeaving(ctx, dl, tr)
	}}
	stopFollowing := dl.OnTighten(s.run)
	context.AfterFunc(ctx, func() {
		stopFollowing()
		s.stop()
	})
	select {
	case <-changed: // moved before the drain followed it
		go s.run()
	default:
	}
}

// sweeps runs a drain's sweeps one at a time: a sweep asked for while one runs follows it,
// and one whose cuts failed runs again a second later.
type sweeps struct {
	sweep func() (failed int)

	mu      sync.Mutex
	running bool
	again   bool        // asked for while one ran
	retry   *time.Timer // a failed sweep's next try
	stopped bool
}

// run sweeps now, or after the sweep under way.
func (s *sweeps) run() {
	s.mu.Lock()
	if s.running || s.stopped {
		s.again = s.running
		s.mu.Unlock()
		return
	}
	s.running = true
	s.mu.Unlock()
	for {
		failed := s.sweep()
		s.mu.Lock()
		if s.again && !s.stopped {
			s.again = false
			s.mu.Unlock()
			continue
		}
		s.running, s.again = false, false
		if failed > 0 && !s.stopped {
			s.retry = time.AfterFunc(time.Second, s.run)
		}
		s.mu.Unlock()
		return
	}
}

// stop ends the retries; a sweep under way ends with the drain's context.
func (s *sweeps) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.retry != nil {
		s.retry.Stop()
	}
}

// catchUp sweeps once more if the deadline moved while this worker's deletion was in flight:
// the pod was not yet among the leaving pods when the sweep for that change ran.
func (d *Drainer) catchUp(ctx context.Context, tightened <-chan struct{}, dl *Deadline, tr *tracker) {
	select {
	case <-tightened:
		d.shortenLeaving(ctx, dl, tr)
	default:
	}
}

// shortenLeaving gives every leaving pod that would end after the deadline a grace period
// that ends before it, and returns how many cuts failed and are worth trying again.
func (d *Drainer) shortenLeaving(ctx context.Context, dl *Deadline, tr *tracker) (failed int) {
	deadline := dl.Time()
	grace := max(int64(time.Until(deadline).Seconds())-1, 1)
	by := time.Now().Add(time.Duration(grace) * time.Second)
	for _, pod := range tr.endingAfter(deadline) {
		if ctx.Err() != nil {
			return failed
		}
		log := d.opts.Logger.With("pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
		err := d.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &pod.UID}, GracePeriodSeconds: &grace,
		})
		switch {
		case err == nil:
			tr.leavingBy(pod, by)
			log.Info("the deadline moved earlier: cut the grace period of a pod already leaving", "gracePeriodSeconds", grace)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			tr.markGone(pod.UID, time.Now())
		case ctx.Err() != nil:
			return failed
		case apierrors.IsForbidden(err):
			// Not worth a retry every second: RBAC grants pods delete or it does not.
			log.Warn("could not cut the grace period of a pod already leaving: no permission to delete pods", "err", err)
		default:
			failed++
			log.Warn("could not cut the grace period of a pod already leaving; trying again", "err", err)
		}
	}
	return failed
}

// gracePeriod is the grace period to request: the override or the pod's own, cut to end
// before the deadline unless it is patient (see NewPatientDeadline). nil keeps the pod's own.
func (d *Drainer) gracePeriod(pod *Pod, deadline time.Time, patient bool) *int64 {
	g, explicit := podGrace(pod), false
	if d.opts.PodGracePeriod >= 0 {
		g, explicit = int64(d.opts.PodGracePeriod), true
	}
	if left := int64(time.Until(deadline).Seconds()) - 1; left < g && !patient {
		g, explicit = max(left, 1), true
	}
	if !explicit {
		return nil
	}
	return &g
}

func podGrace(pod *Pod) int64 {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}
