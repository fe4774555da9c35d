// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/status"
)

// Steps of a drain held by a PodDisruptionBudget, from the handlers' logs.
const (
	EventBlocked  EventKind = "blocked"  // a budget first refused the pod's eviction
	EventReleased EventKind = "released" // the pod's eviction was accepted after that
)

// Log messages the handlers write when a budget holds a pod and lets it go.
const (
	msgBudgetBlocked  = "eviction refused by a disruption budget; retrying until the deadline"
	msgBudgetReleased = "eviction accepted after a disruption budget refused it"
)

// statusTimeout bounds the mid-drain `lifeboat status`: it must not stall the demo.
const statusTimeout = 5 * time.Second

// When checkout's owner relaxes its budget.
const (
	// ownerRelaxesAfter is how long the owner takes, from the first pod reported held: long
	// enough for the hold to show, short enough to keep the demo short.
	ownerRelaxesAfter = 3 * time.Second
	// ownerRelaxesAnyway: with no pod reported held by then, the owner relaxes the budget
	// anyway, so that such a run ends (and fails its check) rather than drain until the
	// deadlines.
	ownerRelaxesAnyway = 20 * time.Second
)

// BlockedPod is a pod whose eviction a disruption budget refused, as the handler logged it.
type BlockedPod struct {
	Pod               string
	Budget            string        // the PodDisruptionBudget; "" when several select the pod
	Why               string        // the budget and its numbers, as printed
	Blocked, Released time.Duration // Released is -1 if never logged
}

// MidDrainStatus is the one `lifeboat status` run while a pod was held by a budget.
type MidDrainStatus struct {
	Ran    bool
	At     time.Duration
	Output string
	Err    string // how the command failed; "" when it did not
	Listed bool   // its output named a node of the scenario
	// Held maps each pod its output shows held by a PodDisruptionBudget to that budget.
	Held map[string]string
}

// Relaxation is the application owner's change to a budget that allowed no disruption.
type Relaxation struct {
	At             time.Duration
	Budget, Change string // the PodDisruptionBudget's name, and what changed (as printed)
}

// budgetLineLocked turns a handler's budget log line into a progress line, once per pod
// and kind, and starts the mid-drain status at the first pod held.
func (w *watcher) budgetLineLocked(l logLine, kind EventKind) {
	lane, ok := w.lanes[l.str("node")]
	pod := l.str("pod")
	if !ok || w.start.IsZero() || w.budgetSeen[string(kind)+" "+pod] {
		return
	}
	w.budgetSeen[string(kind)+" "+pod] = true
	at := time.Since(w.start)
	if t, err := time.Parse(time.RFC3339Nano, l.str("time")); err == nil {
		at = t.Sub(w.start)
	}
	budget := l.str("budget")
	w.recordEventLocked(Event{At: at, Lane: lane, Kind: kind, Pod: pod, Budget: budget, Detail: budgetText(kind, pod, budget, l.str("detail"))})
	if kind == EventBlocked && w.statusDone == nil {
		// The status starts before the owner hears of the hold: relaxWhenHeld waits for it.
		w.startStatusLocked()
		close(w.held)
	}
}

// startStatusLocked starts the one mid-drain `lifeboat status`, at the first pod a budget
// holds, as an operator would on hearing of it.
func (w *watcher) startStatusLocked() {
	w.statusDone = make(chan struct{})
	if w.statusBin == "" {
		close(w.statusDone)
		return
	}
	go w.midDrainStatus()
}

// budgetText is what a progress line says of a held or released pod. The budget is empty
// when several budgets cover the pod.
func budgetText(kind EventKind, pod, budget, detail string) string {
	by := "PodDisruptionBudget " + budget
	if budget == "" {
		by = "several PodDisruptionBudgets"
	}
	if kind == EventReleased {
		return fmt.Sprintf("%s, %s now allows it", pod, strings.Replace(by, "PodDisruptionBudget ", "budget ", 1))
	}
	return fmt.Sprintf("%s by %s (%s)", pod, by, detail)
}

// midDrainStatus runs `lifeboat status` as an operator would while a drain is held, prints
// its output (or why it failed) and keeps it for the checks.
func (w *watcher) midDrainStatus() {
	defer close(w.statusDone)
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.statusBin, "status")
	// Only what status needs: the admin kubeconfig, and no instance metadata lookups.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "KUBECONFIG=" + w.statusKubeconfig, "AWS_EC2_METADATA_DISABLED=true"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()

	w.mu.Lock()
	defer w.mu.Unlock()
	s := MidDrainStatus{Ran: true, At: time.Since(w.start), Output: strings.TrimRight(stdout.String(), "\n")}
	if err != nil {
		s.Err = strings.TrimSpace(fmt.Sprintf("%v %s", err, stderr.String()))
	}
	for node := range w.lanes {
		if strings.HasPrefix(node, "i-") {
			continue // instance ids; status lists nodes
		}
		s.Listed = s.Listed || strings.Contains(s.Output, node)
	}
	s.Held = heldPods(s.Output)
	w.status = s
	fmt.Fprintf(w.out, "  %7s  lifeboat status, mid-drain:\n", fmt.Sprintf("+%.1fs", s.At.Seconds()))
	for _, line := range strings.Split(s.Output, "\n") {
		fmt.Fprintln(w.out, strings.TrimRight("             "+line, " "))
	}
	if s.Err != "" {
		fmt.Fprintf(w.out, "             lifeboat status FAILED: %s\n", s.Err)
	}
}

// heldPods reads the pods a `lifeboat status` table shows held by a PodDisruptionBudget
// ("pod  shop/checkout-…  held  PodDisruptionBudget checkout allows no disruption now …"),
// with the budget it names.
func heldPods(output string) map[string]string {
	held := map[string]string{}
	for _, line := range strings.Split(output, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && f[0] == "pod" && f[2] == status.StateHeld && f[3] == "PodDisruptionBudget" {
			held[f[1]] = f[4]
		}
	}
	return held
}

// relaxWhenHeld plays checkout's application owner, told that its budget holds a drain: a
// few seconds after the first pod is reported held, it relaxes the budget to minAvailable
// checkoutRelaxedTo. It waits for the operator's mid-drain `lifeboat status` first, so that
// status always sees the budget allow nothing.
func relaxWhenHeld(ctx context.Context, client kubernetes.Interface, w *watcher) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.held:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(ownerRelaxesAfter):
		}
	case <-time.After(ownerRelaxesAnyway):
	}
	w.midDrain()
	b := checkoutBudget
	// A merge patch of the spec alone: no conflict with the disruption controller's
	// updates of the status.
	patch := fmt.Sprintf(`{"spec":{"minAvailable":%d}}`, checkoutRelaxedTo)
	if _, err := client.PolicyV1().PodDisruptionBudgets(b.workload.namespace).Patch(ctx, b.workload.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("relax PodDisruptionBudget %s as its owner: %w", b.workload.name, err)
	}
	w.budgetRelaxed(b.workload.name, fmt.Sprintf("minAvailable %s → %d", b.minAvailable, checkoutRelaxedTo))
	return nil
}

// budgetRelaxed records and prints the owner's relaxation of a budget.
func (w *watcher) budgetRelaxed(budget, change string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.relaxed = &Relaxation{At: time.Since(w.start), Budget: budget, Change: change}
	fmt.Fprintf(w.out, "  %7s  app owner relaxes PodDisruptionBudget %s: %s\n", at(w.relaxed.At), budget, change)
}

// midDrain waits (a while) for the mid-drain status, if it was started, and returns it.
func (w *watcher) midDrain() MidDrainStatus {
	w.mu.Lock()
	done := w.statusDone
	w.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-time.After(2 * statusTimeout):
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// budgetHolds lists the lane's pods held by a budget, with when each was released.
func budgetHolds(events []Event, lane string) []BlockedPod {
	var holds []BlockedPod
	for _, ev := range events {
		if ev.Lane != lane {
			continue
		}
		switch ev.Kind {
		case EventBlocked:
			holds = append(holds, BlockedPod{Pod: ev.Pod, Budget: ev.Budget, Why: ev.Detail, Blocked: ev.At, Released: -1})
		case EventReleased:
			for i := range holds {
				if holds[i].Pod == ev.Pod {
					holds[i].Released = ev.At
				}
			}
		}
	}
	return holds
}

// releasedCount counts the pods both held and later released.
func releasedCount(holds []BlockedPod) int {
	n := 0
	for _, h := range holds {
		if h.Released >= 0 {
			n++
		}
	}
	return n
}
