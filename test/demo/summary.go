// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// writeSummary prints the summary table to out and saves it to path.
func writeSummary(out io.Writer, path string, r *Result) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "\nSummary (times from the first notice; setup %.1fs, whole run %.1fs)\n\n", r.Setup.Seconds(), r.Total.Seconds())
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tKIND\tHANDLED BY\tNOTICE\tCORDONED\tDRAINED\tLIFECYCLE COMPLETED")
	for _, c := range r.Cases {
		lifecycle := "- (no lifecycle hook)"
		if c.HasHook {
			lifecycle = fmt.Sprintf("%s (%s, %d call)", at(c.Completed), orDash(c.LifecycleResult), c.Completions)
			if c.Completions != 1 {
				lifecycle = fmt.Sprintf("%s (%s, %d calls)", at(c.Completed), orDash(c.LifecycleResult), c.Completions)
			}
		}
		fmt.Fprintf(tw, "node %s %s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Node, c.Title, c.Handler, at(c.Notice), at(c.Cordoned), at(c.Drained), lifecycle)
	}
	f := r.Foreign
	fmt.Fprintf(tw, "foreign %s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.InstanceID, "Auto Scaling terminate hook, SQS", "controller", at(f.Notice),
		"refused "+at(f.Refused), "-", fmt.Sprintf("- (%d calls)", f.CompleteCalls))
	tw.Flush()

	recordedB := at(r.Cases[1].Recorded)
	if r.Cases[1].Detach != nil {
		recordedB += ", after its hand-back"
	}
	fmt.Fprintf(&b, "\nDrained means the last evicted pod was gone; Lifeboat then recorded it on the Node (A %s, B %s).\n",
		at(r.Cases[0].Recorded), recordedB)
	for _, c := range r.Cases {
		if c.Detach != nil {
			writeDetach(&b, c)
		}
	}
	for _, c := range r.Cases {
		fmt.Fprintf(&b, "\nPods of node %s (%s): %s\n", c.Name, c.Node, tierCounts(c))
		if c.DrainLog != "" {
			fmt.Fprintf(&b, "  %s's drain: %s\n", c.Handler, c.DrainLog)
		}
		fmt.Fprintf(&b, "  held by a PodDisruptionBudget: %d pod(s) blocked, %d released\n", len(c.Blocked), releasedCount(c.Blocked))
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, p := range c.Evicted {
			note := fmt.Sprintf("%d eviction request", p.Attempts)
			if p.Attempts != 1 {
				note += "s"
			}
			if p.Refused > 0 {
				note += fmt.Sprintf(", %d refused by the PodDisruptionBudget", p.Refused)
			}
			if p.Arrived {
				note += "; a replacement scheduled here before the cordon"
			}
			fmt.Fprintf(tw, "  evicted\t%s\t%s\t%s, gone %s\t%s\n", p.Tier, p.Pod, at(p.Evicted), at(p.Gone), note)
		}
		for _, s := range c.Skipped {
			fmt.Fprintf(tw, "  left\t%s\t%s\t-\t%s\n", s.Tier, s.Pod, orDash(s.Reason))
		}
		for _, p := range c.Left {
			fmt.Fprintf(tw, "  LEFT\t?\t%s\t-\tstill on the node after the drain\n", p)
		}
		tw.Flush()
	}
	for _, c := range r.Cases {
		writeEvents(&b, c)
	}

	fmt.Fprintf(&b, "\nRefused as foreign: %s (%s)\n  reason (controller log): %s\n", f.InstanceID, at(f.Refused), orDash(f.Reason))
	fmt.Fprintf(&b, "  CompleteLifecycleAction calls for it: %d; its lifecycle action completed: %v\n", f.CompleteCalls, f.ActionCompleted)
	fmt.Fprintf(&b, "  its message is not deleted (DELETE_SQS_MSG_IF_NODE_NOT_FOUND=false): held back for %s, then delivered again; %d message(s) in flight\n",
		f.RetryAfter, f.InFlight)
	if r.Quiet.Touched == "" && len(r.Quiet.Evicted) == 0 {
		fmt.Fprintf(&b, "Node C (%s), which had no notice: untouched.\n", r.Quiet.Node)
	} else {
		fmt.Fprintf(&b, "Node C (%s), which had no notice: changed (%s), evicted %v.\n", r.Quiet.Node, r.Quiet.Touched, r.Quiet.Evicted)
	}
	if rx := r.Relaxed; rx != nil {
		fmt.Fprintf(&b, "PodDisruptionBudget %s allowed no disruption until its owner relaxed it at %s (%s).\n", rx.Budget, at(rx.At), rx.Change)
	} else {
		fmt.Fprintf(&b, "PodDisruptionBudget %s was never relaxed by its owner.\n", checkoutBudget.workload.name)
	}
	writeMidDrain(&b, r.MidDrain)
	if len(r.Counted) > 0 {
		fmt.Fprintln(&b, "\nWhat the processes counted (/metrics; series still at 0 left out):")
		for _, n := range r.Counted {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}

	fmt.Fprintf(&b, "\nTimeline:        %s\nSummary:         %s\nAgent log:       %s\nController log:  %s\n",
		r.Files.Timeline, r.Files.Summary, r.Files.AgentLog, r.Files.ControllerLog)
	if len(r.Problems) == 0 {
		fmt.Fprintln(&b, "\nEvery case was handled as expected.")
	} else {
		fmt.Fprintf(&b, "\nNOT HANDLED AS EXPECTED (sandbox files kept in %s):\n", r.Files.Sandbox)
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
	}
	if _, err := out.Write(b.Bytes()); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// writeDetach says what the node held besides its pods, how long its handler waited for
// each before handing the instance back, and whether the completion came after both.
func writeDetach(b *bytes.Buffer, c Case) {
	h := c.Detach
	fmt.Fprintf(b, "\nHand-back of node %s: between the drain and the lifecycle completion the %s waits for\n", c.Name, c.Handler)
	fmt.Fprintf(b, "  target  %s in target group %s: deregistered by Auto Scaling %s, draining until %s\n",
		h.Target, h.TargetGroup, at(h.Deregistered), at(h.TargetGone))
	fmt.Fprintf(b, "  volume  %s of %s (VolumeAttachment %s): pod gone %s, detached %s\n", h.Volume, h.Pod, h.Attachment, at(h.PodGone), at(h.Detached))
	var waits []string
	for _, name := range []string{"targets", "volumes"} {
		if hw, ok := h.wait(name); ok {
			waits = append(waits, hw.String())
		} else {
			waits = append(waits, "? for "+waitPurpose[name]+" (not logged)")
		}
	}
	fmt.Fprintf(b, "  the %s waited %s\n", c.Handler, strings.Join(waits, "; "))
	held := append(slices.Clone(h.DrainingAtCompletion), h.AttachedAtCompletion...)
	switch {
	case c.Completed < 0:
		fmt.Fprintln(b, "  lifecycle action not completed")
	case len(held) == 0:
		fmt.Fprintf(b, "  lifecycle action completed %s, after both: when the call arrived no target was draining and no volume attached\n", at(c.Completed))
	default:
		fmt.Fprintf(b, "  lifecycle action completed %s while it still held %s\n", at(c.Completed), strings.Join(held, ", "))
	}
}

// tierCounts says how many pods of each tier were evicted and skipped.
func tierCounts(c Case) string {
	count := func(tiers []string) string {
		n := map[string]int{}
		for _, t := range tiers {
			n[t]++
		}
		var parts []string
		for _, t := range []string{TierWorkload, TierCritical, TierDaemonSet, TierMirror} {
			if n[t] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n[t], t))
			}
		}
		if len(parts) == 0 {
			return "none"
		}
		return strings.Join(parts, ", ")
	}
	var evicted, skipped []string
	for _, p := range c.Evicted {
		evicted = append(evicted, p.Tier)
	}
	for _, p := range c.Skipped {
		skipped = append(skipped, p.Tier)
	}
	return "evicted " + count(evicted) + "; left " + count(skipped)
}

func at(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("+%.1fs", d.Seconds())
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeMidDrain says in one line whether the mid-drain `lifeboat status` ran and listed a node,
// and which pods it showed held by which budget.
func writeMidDrain(b *bytes.Buffer, s MidDrainStatus) {
	switch {
	case !s.Ran:
		fmt.Fprintln(b, "lifeboat status, mid-drain: not run (no pod was held by a budget)")
	case s.Err != "":
		fmt.Fprintf(b, "lifeboat status, mid-drain (%s): failed: %s\n", at(s.At), s.Err)
	default:
		var held []string
		for pod, budget := range s.Held {
			held = append(held, pod+" by "+budget)
		}
		slices.Sort(held)
		fmt.Fprintf(b, "lifeboat status, mid-drain (%s): ran, listed a node of the scenario: %v; showed held: %s\n",
			at(s.At), s.Listed, cmp.Or(strings.Join(held, ", "), "none"))
	}
}
