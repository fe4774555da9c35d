// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/test/sandbox"
)

// azCalibration is what the calibration found. bestSettled is the best eviction step's
// pods gone per second, kwok's deletions included.
//
// Eviction steps last a fixed time (LIFEBOAT_SCALE_CALIBRATION_SECONDS) rather than a fixed
// count: an eviction's answer comes before the work it causes (kwok deletes the pod, every
// watcher hears of it), and a step of a few hundred answered in 1.5 s borrows from that work.
// Measured with 600 a step, the best step answered 384 evictions/s while its pods went at
// 172/s, and from one run to the next the best step ranged from 152 to 412/s; a step of
// seconds pays for the deletions it causes, as a two-minute burst does.
//
// The long step runs after the climb at the best step's concurrency for
// LIFEBOAT_SCALE_CALIBRATION_LONG_SECONDS (default 30) without waiting for its pods to go, so
// that most of it bears the deletions its own evictions cause, as the burst does; its rate
// is counted as Lifeboat's is, between the 10th and 90th percentile of its answers
// (longEvictions). A ten-second step is answered before most of its deletions come: over
// eleven runs the best step ranged 251-436/s, and the share was high exactly where it was low.
//
// The closing step is the long step again, after the burst (azCalibration.close): the
// server's pace drifts between windows of one run by more than the gap the goal allows, and
// the mean of a step before the burst and one after it takes a steady drift out.
type azCalibration struct {
	patches, evictions         []azStep
	bestPatches, bestEvictions float64
	bestSettled                float64
	long                       *azStep // nil without a long step
	longEvictions              float64
	closing                    *azStep // nil until close ran
	closingEvictions           float64
	pool                       *azEvictionPool
}

// The climb goes on until azFlatSteps steps in a row were not azRising times faster than
// the best before them: one step of a few seconds can be slow by chance.
const (
	azRising    = 1.1
	azFlatSteps = 2
)

// azWarmup requests of each kind precede the steps (not counted), so that the first step,
// the latency baseline, does not pay for connection set-up.
const azWarmup = 40

// azClosingPodsPerSecond sizes the closing step's pool: enough for its whole time at a
// faster pace than any long step measured (up to LIFEBOAT_SCALE_CALIBRATION_PODS).
const azClosingPodsPerSecond = 700

// azEvictionPool evicts the calibration pods, each once and in order, as the calibration's
// identity, and times steps of it.
type azEvictionPool struct {
	c      *sandbox.Cluster
	w      *azWorld
	client kubernetes.Interface
	codes  *azCodes

	mu      sync.Mutex
	evicted int // pods of w.calibration handed out
}

func (p *azEvictionPool) evict(ctx context.Context, i int) error { // the pool's pod number i
	return p.client.PolicyV1().Evictions("calibration").Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: "calibration", Name: p.w.calibration[i]}})
}

// next hands out the pool's pods in order, each once.
func (p *azEvictionPool) next() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.evicted >= len(p.w.calibration) {
		return 0, false
	}
	p.evicted++
	return p.evicted - 1, true
}

func (p *azEvictionPool) handedOut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.evicted
}

// warmUp evicts azWarmup pods from the pool (not counted) and waits until they are gone.
func (p *azEvictionPool) warmUp(ctx context.Context) error {
	first := p.handedOut()
	azRunStep(ctx, azCalibrationSteps[0], azWarmup, p.codes, func(ctx context.Context, i int) error {
		p.next()
		return p.evict(ctx, first+i)
	})
	return p.waitGone(ctx)
}

// waitGone waits until every pod handed out is gone (kwok deletes each as its eviction
// marks it).
func (p *azEvictionPool) waitGone(ctx context.Context) error {
	upTo := p.handedOut()
	for {
		list, err := p.c.Client.CoreV1().Pods("calibration").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return err
		}
		left := 0
		for _, pod := range list.Items {
			if k, _ := strconv.Atoi(strings.TrimPrefix(pod.Name, "cal-")); k < upTo {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond): // a list of thousands of pods: not too often
		}
	}
}

// step evicts for d, workers at a time, then waits until the step's pods are gone.
func (p *azEvictionPool) step(ctx context.Context, workers int, d time.Duration) azStep {
	before := azAPF(ctx, p.c.Client) // outside the step's time: a scrape of the server's metrics
	cpuBefore := azChildCPU()
	start := time.Now()
	s := azRunTimedStep(ctx, workers, d, p.next, p.codes, p.evict)
	if err := p.waitGone(ctx); err != nil {
		s.errors = s.requests
	}
	s.settled = time.Since(start)
	s.sandboxCPU = azDiff(azChildCPU(), cpuBefore)
	s.cacheWait = azAPF(ctx, p.c.Client).cacheWait["poddisruptionbudgets"].minus(before.cacheWait["poddisruptionbudgets"])
	return s
}

// azCalibrate measures node patches and evictions at rising concurrency (see
// BenchmarkAZReclaim), then undoes the patches and waits until the calibration pods are gone.
func azCalibrate(ctx context.Context, c *sandbox.Cluster, w *azWorld, sc azScale, groups []string, serverProfiles *azServerProfiler) (*azCalibration, error) {
	rc, err := c.UserConfig(azCalibrationUser, groups...)
	if err != nil {
		return nil, err
	}
	rc.QPS = -1 // no client-side limit: the server decides
	codes := &azCodes{codes: map[string]int{}}
	client, err := kubernetes.NewForConfig(kube.Instrumented(rc, "calibration", codes))
	if err != nil {
		return nil, err
	}
	out := &azCalibration{pool: &azEvictionPool{c: c, w: w, client: client, codes: codes}}
	climb := func(run func(workers int) azStep) ([]azStep, float64) {
		var steps []azStep
		best, flat := 0.0, 0
		for _, workers := range azCalibrationSteps {
			prior := best
			s := run(workers)
			steps = append(steps, s)
			if s.throttled == 0 {
				best = max(best, s.rate())
			}
			if s.rate() < azRising*prior {
				flat++
			} else {
				flat = 0
			}
			if s.throttled > 0 || flat == azFlatSteps || s.ranOut || ctx.Err() != nil {
				break
			}
		}
		if best == 0 { // every step was throttled: the best it got anyway
			for _, s := range steps {
				best = max(best, s.rate())
			}
		}
		return steps, best
	}

	// Cordon-style merge patches of the nodes outside the zone: the first pass over them
	// cordons, the next uncordons, and so on.
	nodes := w.other
	patched := 0
	patch := func(ctx context.Context, i int) error {
		k := patched + i
		body := `{"spec":{"unschedulable":true}}`
		if (k/len(nodes))%2 == 1 {
			body = `{"spec":{"unschedulable":null}}`
		}
		_, err := client.CoreV1().Nodes().Patch(ctx, nodes[k%len(nodes)].Name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	azRunStep(ctx, azCalibrationSteps[0], azWarmup, codes, patch)
	patched += azWarmup
	out.patches, out.bestPatches = climb(func(workers int) azStep {
		s := azRunStep(ctx, workers, sc.calibration, codes, patch)
		patched += sc.calibration
		return s
	})
	if err := azInParallel(ctx, len(nodes), azSetupWorkers, func(ctx context.Context, i int) error {
		_, err := c.Client.CoreV1().Nodes().Patch(ctx, nodes[i].Name, types.MergePatchType, []byte(`{"spec":{"unschedulable":null}}`), metav1.PatchOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("uncordon the calibration nodes: %w", err)
	}

	// Evictions of the calibration pods, each step its own pods, after the previous step's
	// are gone.
	if err := out.pool.warmUp(ctx); err != nil {
		return nil, err
	}
	out.evictions, out.bestEvictions = climb(func(workers int) azStep { return out.pool.step(ctx, workers, sc.evictionStep) })
	bestWorkers := 0
	for _, s := range out.evictions {
		if s.throttled == 0 && s.errors == 0 {
			out.bestSettled = max(out.bestSettled, float64(s.requests)/s.settled.Seconds())
		}
		if s.throttled == 0 && s.rate() == out.bestEvictions {
			bestWorkers = s.workers
		}
	}
	if sc.longStep > 0 && bestWorkers > 0 && ctx.Err() == nil {
		// The server's profile over the step's middle, once its deletions have caught up.
		serverProfiles.start(ctx, "long", max(0, (sc.longStep-azServerProfileFor)/2))
		s := out.pool.step(ctx, bestWorkers, sc.longStep)
		serverProfiles.wait()
		out.long, out.longEvictions = &s, azSustainedRate(s.answered)
	}
	// Pods of steps not run go too: the burst meets none of them.
	if err := c.Client.CoreV1().Pods("calibration").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return nil, err
	}
	out.pool.mu.Lock()
	out.pool.evicted = len(w.calibration)
	out.pool.mu.Unlock()
	if err := out.pool.waitGone(ctx); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

// close runs the closing step, once the burst is over and its watchers stopped: new
// calibration pods, Running like the first ones, then the long step again at the same
// concurrency. Without a long step it does nothing.
func (cal *azCalibration) close(ctx context.Context, sc azScale) error {
	if cal.long == nil {
		return nil
	}
	p := cal.pool
	rc := rest.CopyConfig(p.c.AdminConfig)
	rc.QPS = -1 // azSetupWorkers bounds the requests in flight
	admin, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	first := len(p.w.calibration)
	// No more than the calibration had: a small run's step runs out as its first long step did.
	n := min(azWarmup+int(sc.longStep.Seconds()*azClosingPodsPerSecond), sc.calibrationPods)
	for k := first; k < first+n; k++ {
		p.w.calibration = append(p.w.calibration, p.w.calibrationPod(k).Name)
	}
	if err := azInParallel(ctx, n, azSetupWorkers, func(ctx context.Context, i int) error {
		pod := p.w.calibrationPod(first + i)
		_, err := admin.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create the closing step's pods: %w", err)
	}
	if err := azWaitRunning(ctx, admin); err != nil {
		return err
	}
	if err := p.warmUp(ctx); err != nil {
		return err
	}
	s := p.step(ctx, cal.long.workers, sc.longStep)
	cal.closing, cal.closingEvictions = &s, azSustainedRate(s.answered)
	return nil
}

// yardstick is the rate Lifeboat is judged against: the mean of the long steps before and
// after the burst, or the one before alone when there is no closing step.
func (cal *azCalibration) yardstick() float64 {
	if cal.closing == nil || cal.closingEvictions == 0 {
		return cal.longEvictions
	}
	return (cal.longEvictions + cal.closingEvictions) / 2
}
