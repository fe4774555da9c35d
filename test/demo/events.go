// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/test/sandbox"
)

// story is the order in which a case's node must show Lifeboat's Events, oldest first: the
// notice, the cordon, the drain's start and end, the hand-back's waits that took a second or
// more (Lifeboat tells only those), and for a lifecycle hook the completion. Other Events (a
// budget holding a pod) may come between.
func story(c Case) []string {
	s := []string{events.ReasonSpotInterruption}
	if c.HasHook {
		s[0] = events.ReasonASGLifecycle
	}
	s = append(s, events.ReasonCordon, events.ReasonDrainStarted, events.ReasonDrained)
	if c.Detach != nil {
		for _, w := range c.Detach.Waits {
			if w.Outcome == WaitReleased && w.Took >= time.Second {
				s = append(s, events.ReasonDetachWaited)
			}
		}
	}
	if c.HasHook {
		s = append(s, events.ReasonLifecycleCompleted)
	}
	return s
}

// nodeEventsOf reads the node's Events as `kubectl describe node` lists them, waiting (up to
// timeout) for those the story still lacks: the last ones are written just after the work
// they report, by a recorder that sends them in the background.
func nodeEventsOf(ctx context.Context, e *env, node string, origin time.Time, want []string, timeout time.Duration) ([]sandbox.NodeEvent, error) {
	deadline := time.Now().Add(timeout)
	for {
		list, err := sandbox.NodeEvents(ctx, e.client, node)
		if err != nil {
			return nil, err
		}
		out := make([]sandbox.NodeEvent, len(list))
		for i, ev := range list {
			out[i] = sandbox.NodeEventOf(ev, origin)
		}
		if missing(out, want) == "" || time.Now().After(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// missing names the first reason of want that Lifeboat's Events do not show in want's order
// (each after the one before it); "" when they all do.
func missing(evs []sandbox.NodeEvent, want []string) string {
	i := 0
	for _, ev := range evs {
		if i < len(want) && ev.From == events.Component && ev.Reason == want[i] {
			i++
		}
	}
	if i == len(want) {
		return ""
	}
	return want[i]
}

// checkEvents lists the ways a case's node Events fail to tell its story in order.
func checkEvents(name string, c Case) []string {
	if len(c.Events) == 0 {
		return []string{fmt.Sprintf("%s: no Events on the node (kubectl describe node shows nothing of Lifeboat)", name)}
	}
	want := story(c)
	if m := missing(c.Events, want); m != "" {
		var got []string
		for _, ev := range c.Events {
			if ev.From == events.Component {
				got = append(got, ev.Reason)
			}
		}
		return []string{fmt.Sprintf("%s: its Events, oldest first, lack %s in the order %s (got %s)",
			name, m, strings.Join(want, ", "), strings.Join(got, ", "))}
	}
	return nil
}

// writeEvents prints a case's node Events as the Events section of `kubectl describe node`.
func writeEvents(b *bytes.Buffer, c Case) {
	fmt.Fprintf(b, "\nkubectl describe node %s (node %s), its Events, oldest first (At: from the second of the first notice):\n", c.Node, c.Name)
	if len(c.Events) == 0 {
		fmt.Fprintln(b, "  <none>")
		return
	}
	_ = sandbox.WriteNodeEvents(b, slices.Clone(c.Events))
}
