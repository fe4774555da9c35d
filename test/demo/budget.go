package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
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

// BlockedPod is a pod whose eviction a disruption budget refused, as the handler logged it.
type BlockedPod struct {
	Pod               string
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
	w.recordAtLocked(at, lane, kind, pod, "", budgetText(kind, pod, l.str("budget"), l.str("detail")))
	if kind == EventBlocked {
		w.startStatusLocked()
	}
}

// startStatusLocked starts the one mid-drain `lifeboat status`, unless it already ran: at the
// first pod a budget holds, or else at the second eviction, when a budget happened not to
// refuse any (whether one does depends on timing).
func (w *watcher) startStatusLocked() {
	if w.statusDone == nil && w.statusBin != "" {
		w.statusDone = make(chan struct{})
		go w.midDrainStatus()
	}
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
	w.status = s
	fmt.Fprintf(w.out, "  %7s  lifeboat status, mid-drain:\n", fmt.Sprintf("+%.1fs", s.At.Seconds()))
	for _, line := range strings.Split(s.Output, "\n") {
		fmt.Fprintln(w.out, strings.TrimRight("             "+line, " "))
	}
	if s.Err != "" {
		fmt.Fprintf(w.out, "             lifeboat status FAILED: %s\n", s.Err)
	}
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
			holds = append(holds, BlockedPod{Pod: ev.Pod, Why: ev.Detail, Blocked: ev.At, Released: -1})
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
