// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// pendingEpisodes is how many nodes TestRestartResumesPendingEpisodes schedules:
// LIFEBOAT_PENDING_EPISODES, else a count that keeps `make test` short.
func pendingEpisodes(t *testing.T) int {
	if v := os.Getenv("LIFEBOAT_PENDING_EPISODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LIFEBOAT_PENDING_EPISODES=%q: want a positive number", v)
		}
		return n
	}
	return 30
}

// queueLength counts the queue's messages, visible or in flight.
func (w *intakeWorld) queueLength(t *testing.T, ctx context.Context) int {
	t.Helper()
	out, err := w.queue.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &w.queueURL,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, v := range out.Attributes {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("queue attribute %q: %v", v, err)
		}
		total += n
	}
	return total
}

// Scheduled events hold nothing but their record on the Node: the controller records them,
// deletes their messages, and is stopped; the next controller finds the episodes in its first
// list of nodes and drains each node when its event's drain is due, with nothing on the queue.
func TestRestartResumesPendingEpisodes(t *testing.T) {
	t.Parallel()
	count := pendingEpisodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute+time.Duration(count)*200*time.Millisecond)
	defer cancel()
	w := newIntakeWorld(t, ctx, count)
	const grace = 5 // NODE_TERMINATION_GRACE_PERIOD: drains begin this long before the start
	// Health events state their start to the second.
	start := time.Now().Add(30*time.Second + time.Duration(count)*50*time.Millisecond).Truncate(time.Second)
	drainDue := start.Add(-grace * time.Second)
	var instances []string
	for _, n := range w.nodes {
		instances = append(instances, episode.InstanceIDOf(n))
	}
	for i := 0; i < len(instances); i += 20 { // several Health events, 20 instances each
		batch := instances[i:min(i+20, len(instances))]
		w.send(t, ctx, fakeaws.HealthScheduledChange("retirement-"+strconv.Itoa(i), "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
			start, start.Add(time.Hour), "", "", batch...))
	}
	settings := []string{"NODE_TERMINATION_GRACE_PERIOD", strconv.Itoa(grace)}
	first := w.run(t, ctx, settings...)

	// The first controller cordons every node and lets go of every message.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Until(drainDue)-2*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, n := range w.nodes {
			if !w.node(t, ctx, n).Spec.Unschedulable {
				return false, nil
			}
		}
		return w.queueLength(t, ctx) == 0, nil
	})
	if err != nil {
		t.Fatalf("the first controller did not cordon all %d nodes and empty the queue before the drains were due (%d messages left)", count, w.queueLength(t, ctx))
	}
	recorded := time.Now()
	first()
	t.Logf("%d episodes recorded and the queue emptied %.1f s before the drains are due; controller stopped", count, drainDue.Sub(recorded).Seconds())
	for _, n := range w.nodes {
		r, _ := record.Read(w.node(t, ctx, n))
		if pods := w.podsOn(t, ctx, n); pods != 1 || len(r.Intents) != 1 || r.Phase != record.PhaseDraining {
			t.Fatalf("%s before its drain is due: %d pods (want 1), record %+v", n.Name, pods, r)
		}
	}

	// The second controller drains every node once its drain is due, from the records alone.
	w.run(t, ctx, settings...)
	drained := map[string]time.Time{}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Until(start)+30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, n := range w.nodes {
			if _, ok := drained[n.Name]; ok {
				continue
			}
			if w.phase(t, ctx, n) == record.PhaseDrained && w.podsOn(t, ctx, n) == 0 {
				drained[n.Name] = time.Now()
			}
		}
		return len(drained) == count, nil
	})
	if err != nil {
		t.Fatalf("the second controller drained %d of %d nodes", len(drained), count)
	}
	var firstDrain, lastDrain time.Time
	for _, at := range drained {
		if firstDrain.IsZero() || at.Before(firstDrain) {
			firstDrain = at
		}
		if at.After(lastDrain) {
			lastDrain = at
		}
	}
	t.Logf("drains due at +0 s; first node drained at %+.1f s, last at %+.1f s", firstDrain.Sub(drainDue).Seconds(), lastDrain.Sub(drainDue).Seconds())
	if firstDrain.Before(drainDue) {
		t.Errorf("a node was drained %.1f s before its drain was due", drainDue.Sub(firstDrain).Seconds())
	}
	if n := w.queueLength(t, ctx); n != 0 {
		t.Errorf("%d messages on the queue after the drains, want none", n)
	}
	for _, n := range w.nodes[:min(count, 5)] {
		if got := w.eventCountReaching(t, ctx, n, "DrainStarted", 1); got != 1 {
			t.Errorf("%s: %d DrainStarted Events, want 1", n.Name, got)
		}
	}
}
