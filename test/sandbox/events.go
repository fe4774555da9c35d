// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// NodeEvents lists the Events about a node, oldest first, as `kubectl describe node` shows
// them: by the time each was last seen. Events seen in the same second (the legacy Event's
// timestamps have no finer unit) keep the order they were created in, which their names
// carry: client-go's recorder names an Event after its object and the creation time in
// nanoseconds, in hexadecimal. Events recorded concurrently come in the order of the work
// (inStoryOrder).
func NodeEvents(ctx context.Context, client kubernetes.Interface, node string) ([]corev1.Event, error) {
	list, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", "Node"),
			fields.OneTermEqualSelector("involvedObject.name", node)).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the Events of node %s: %w", node, err)
	}
	events := list.Items
	SortEvents(events)
	inStoryOrder(events)
	return events, nil
}

// concurrentPairs are Events that two goroutines record within milliseconds of each other,
// in no defined order: the intake's cordon, and the drain its write lets start (the node's
// update reaches the drain's queue through the informer while the intake is still on its way
// to the Event). Listed in the order the work happened.
var concurrentPairs = [][2]string{{"Cordon", "DrainStarted"}}

// inStoryOrder puts each pair of concurrentPairs from one component, found the wrong way
// round and seen within a second of each other, back in the order of the work.
func inStoryOrder(events []corev1.Event) {
	for i := 0; i+1 < len(events); i++ {
		a, b := events[i], events[i+1]
		for _, pair := range concurrentPairs {
			if a.Reason == pair[1] && b.Reason == pair[0] && a.Source.Component == b.Source.Component &&
				lastSeen(b).Sub(lastSeen(a)) <= time.Second {
				events[i], events[i+1] = b, a
			}
		}
	}
}

// SortEvents puts Events in `kubectl describe` order (see NodeEvents).
func SortEvents(events []corev1.Event) {
	slices.SortStableFunc(events, func(a, b corev1.Event) int {
		if c := lastSeen(a).Compare(lastSeen(b)); c != 0 {
			return c
		}
		if c := createdAt(a) - createdAt(b); c != 0 {
			if c < 0 {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
}

func lastSeen(e corev1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

// createdAt reads the creation time in the name's last dot-separated part; 0 if there is none.
func createdAt(e corev1.Event) int64 {
	i := strings.LastIndexByte(e.Name, '.')
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseUint(e.Name[i+1:], 16, 63)
	if err != nil {
		return 0
	}
	return int64(n)
}

// NodeEvent is what `kubectl describe` shows of an Event, with when it was last seen relative
// to an origin instead of its age.
type NodeEvent struct {
	Type, Reason, From, Message string
	At                          time.Duration
	Count                       int32
}

// NodeEventOf is e as `kubectl describe` shows it, last seen At after origin.
func NodeEventOf(e corev1.Event, origin time.Time) NodeEvent {
	return NodeEvent{Type: e.Type, Reason: e.Reason, From: e.Source.Component, Message: e.Message,
		At: lastSeen(e).Sub(origin), Count: max(e.Count, 1)}
}

// WriteNodeEvents writes Events as the Events section of `kubectl describe` does (type,
// reason, when, source, message), and how often each repeated.
func WriteNodeEvents(w io.Writer, events []NodeEvent) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tReason\tAt\tFrom\tMessage")
	fmt.Fprintln(tw, "  ----\t------\t--\t----\t-------")
	for _, e := range events {
		at := fmt.Sprintf("%+.0fs", e.At.Seconds())
		if e.Count > 1 {
			at += fmt.Sprintf(" (x%d)", e.Count)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, at, e.From, e.Message)
	}
	return tw.Flush()
}
