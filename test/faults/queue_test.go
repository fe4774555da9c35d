// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

const (
	clusterName = "sandbox"
	asgName     = "workers"
	hookName    = "drain"
)

// queues is goaws behind the fake EC2 / Auto Scaling endpoint, as controller mode sees AWS.
// It knows every message the test sent and checks, as each DeleteMessage arrives, that the
// message's notice is recorded on its node (its intent, or its work already done): from then
// on the node's record carries the work, and the scenarios check at their end that it was
// done (unfinished). A copy of a message may go earlier while another copy of it is still on
// the queue: that one keeps the notice from being lost.
type queues struct {
	w    *world
	sqs  *sandbox.SQS
	fake *fakeaws.Server
	// direct talks to goaws itself, so the fake records only Lifeboat's calls.
	direct *awssqs.Client

	mu         sync.Mutex
	sent       map[string]delivery // by message id
	deleted    map[string]int      // message id -> DeleteMessage calls
	verified   map[delivery]bool   // deliveries found recorded on their node
	violations []string
	// earlyCopies counts copies deleted before their notice was recorded while another copy
	// was still on the queue.
	earlyCopies int
}

// delivery is what a message is about.
type delivery struct {
	node, notice, token string
}

func newQueues(t testing.TB, w *world, names ...string) *queues {
	t.Helper()
	q := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: names})
	fake := sandboxtest.FakeAWS(t, q.Endpoint)
	fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: hookName, AutoScalingGroup: asgName})
	qs := &queues{w: w, sqs: q, fake: fake, direct: awssqs.NewFromConfig(sandboxtest.AWSConfig(q.Endpoint)),
		sent: map[string]delivery{}, deleted: map[string]int{}, verified: map[delivery]bool{}}
	fake.OnCall(qs.checkDelete)
	return qs
}

// addInstances makes the nodes' instances known to EC2 and Auto Scaling as this cluster's.
func (q *queues) addInstances(nodes ...*corev1.Node) {
	for _, n := range nodes {
		q.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, AvailabilityZone: "us-east-1a",
			AutoScalingGroup: asgName, Tags: map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/" + clusterName: "owned"}})
	}
}

// beginTermination starts a terminate lifecycle action for the node's instance and returns
// its token.
func (q *queues) beginTermination(n *corev1.Node) string {
	token := "token-" + shortName(n)
	q.fake.BeginLifecycleAction(hookName, asgName, episode.InstanceIDOf(n), token)
	return token
}

// spot is an EventBridge Spot interruption warning for the node, and what it is about.
func spot(n *corev1.Node, at time.Time) (string, delivery) {
	id := episode.InstanceIDOf(n)
	body := fmt.Sprintf(`{"version":"0","id":"e-%s","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"000000000000","time":"%s","region":"us-east-1","resources":[],"detail":{"instance-id":"%s","instance-action":"terminate"}}`,
		id, at.UTC().Format(time.RFC3339), id)
	return body, delivery{node: n.Name, notice: notice.ID(notice.SpotInterruption, id, "terminate")}
}

// hook is an Auto Scaling terminate lifecycle notification for the node.
func hook(n *corev1.Node, token string, at time.Time) (string, delivery) {
	id := episode.InstanceIDOf(n)
	body := fmt.Sprintf(`{"Origin":"AutoScalingGroup","Destination":"EC2","Service":"AWS Auto Scaling","Time":"%s","AccountId":"000000000000","RequestId":"r-%s","LifecycleActionToken":"%s","AutoScalingGroupName":"%s","LifecycleHookName":"%s","EC2InstanceId":"%s","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}`,
		at.UTC().Format(time.RFC3339), token, token, asgName, hookName, id)
	return body, delivery{node: n.Name, notice: notice.ID(notice.ASGTermination, id, notice.TokenDigest(token)), token: token}
}

// send puts messages on the queue, with that many SendMessage calls in flight at once.
// (goaws answers SendMessageBatch without the Successful list the SDK reads, so batches would
// leave the test without the message ids it checks deletes against.)
func (q *queues) send(t testing.TB, queue string, bodies []string, about []delivery, parallel int) {
	t.Helper()
	url := q.sqs.QueueURLs[queue]
	next := make(chan int)
	errs := make(chan error, parallel)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := range next {
				out, err := q.direct.SendMessage(context.Background(), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(bodies[i])})
				if err == nil && aws.ToString(out.MessageId) == "" {
					err = fmt.Errorf("no message id in the answer")
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				q.mu.Lock()
				q.sent[aws.ToString(out.MessageId)] = about[i]
				q.mu.Unlock()
			}
		})
	}
	for i := range bodies {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("send to %s: %v", queue, err)
	default:
	}
}

// length is how many messages the queue holds, visible or not.
func (q *queues) length(ctx context.Context, queue string) (int, error) {
	url := q.sqs.QueueURLs[queue]
	// Messages being handled are invisible, not gone: both counts must be 0 before the
	// queue is empty (otherwise a test stops Lifeboat while it still finishes a message).
	out, err := q.direct.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, err
	}
	total := 0
	for _, name := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		n, err := strconv.Atoi(out.Attributes[string(name)])
		if err != nil {
			return 0, fmt.Errorf("queue %s: %s: %w", queue, name, err)
		}
		total += n
	}
	return total, nil
}

// waitEmpty waits until the queue holds no message; it reports whether it did.
func (q *queues) waitEmpty(ctx context.Context, queue string, timeout time.Duration) bool {
	return waitFor(ctx, timeout, func() bool {
		n, err := q.length(ctx, queue)
		return err == nil && n == 0
	})
}

// checkDelete runs as each call reaches the fake, before it is forwarded: a DeleteMessage
// must be for a message whose notice is recorded on its node.
func (q *queues) checkDelete(c fakeaws.Call) {
	if c.Service != "sqs" || c.Action != "DeleteMessage" && c.Action != "DeleteMessageBatch" {
		return
	}
	if c.ErrorCode != "" {
		return // refused by the fake (a body cut short by a kill): it never reaches the queue
	}
	handles, err := ReceiptHandles(c.Body)
	if err != nil {
		q.violate("unreadable delete: %v", err)
		return
	}
	for _, h := range handles {
		id, err := MessageIDOfReceipt(h)
		if err != nil {
			q.violate("delete: %v", err)
			continue
		}
		q.mu.Lock()
		d, known := q.sent[id]
		q.deleted[id]++
		done := q.verified[d]
		q.mu.Unlock()
		if !known {
			q.violate("deleted message %s, which the test never sent", id)
			continue
		}
		if done {
			continue
		}
		if problem := q.unrecorded(d); problem != "" {
			if q.copyLeft(d, id) {
				q.mu.Lock()
				q.earlyCopies++
				q.mu.Unlock()
				continue
			}
			q.violate("message %s deleted before its notice was recorded on its node, and no other copy of it was left: %s", id, problem)
			continue
		}
		q.mu.Lock()
		q.verified[d] = true
		q.mu.Unlock()
	}
}

// copyLeft reports whether a message about d other than id was sent and not deleted yet.
func (q *queues) copyLeft(d delivery, id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for other, about := range q.sent {
		if other != id && about == d && q.deleted[other] == 0 {
			return true
		}
	}
	return false
}

// unrecorded says why a delivery's notice is not recorded on its node (its intent, or its
// work already done), "" when it is: from then on the work is the node's reconciler's, and
// the message may go.
func (q *queues) unrecorded(d delivery) string {
	r, err := q.readRecord(d.node)
	if err != nil {
		return fmt.Sprintf("cannot read node %s: %v", d.node, err)
	}
	if r.WorkDone(d.notice, true) || (r.Has(d.notice) && slices.ContainsFunc(r.Intents, func(i record.Intent) bool { return i.ID == d.notice })) {
		return ""
	}
	return fmt.Sprintf("node %s record %+v lacks %s and its intent", d.node, r, d.notice)
}

// waitFinished waits until every delivery's work is done (see unfinished); it reports
// whether it was.
func (q *queues) waitFinished(ctx context.Context, timeout time.Duration, ds ...delivery) bool {
	return waitFor(ctx, timeout, func() bool {
		for _, d := range ds {
			if q.unfinished(d) != "" {
				return false
			}
		}
		return true
	})
}

// readRecord reads a node's record, retrying while the API server may be restarting.
func (q *queues) readRecord(node string) (record.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		r, err := q.w.record(ctx, node)
		if err == nil || ctx.Err() != nil {
			return r, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// unfinished says what is not done yet about a delivery, "" when all is.
func (q *queues) unfinished(d delivery) string {
	r, err := q.readRecord(d.node)
	switch {
	case err != nil:
		return fmt.Sprintf("cannot read node %s: %v", d.node, err)
	case !r.WorkDone(d.notice, true):
		return fmt.Sprintf("node %s record %+v lacks %s drained and finished", d.node, r, d.notice)
	}
	if d.token != "" {
		if _, completed, _, _ := q.fake.LifecycleAction(d.token); !completed {
			return fmt.Sprintf("lifecycle action %s not completed", d.token)
		}
	}
	return ""
}

func (q *queues) violate(format string, args ...any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.violations = append(q.violations, fmt.Sprintf(format, args...))
}

// checkMessages fails the test for every early delete seen, and for every message sent
// about these nodes that was never deleted.
func (q *queues) checkMessages(t testing.TB, nodes map[string]bool) (sent, deletes int) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, v := range q.violations {
		t.Error(v)
	}
	q.violations = nil
	if q.earlyCopies > 0 {
		t.Logf("%d copies of a message deleted before their notice was recorded, another copy still on the queue", q.earlyCopies)
	}
	for id, d := range q.sent {
		if !nodes[d.node] {
			continue
		}
		sent++
		deletes += q.deleted[id]
		if q.deleted[id] == 0 {
			t.Errorf("message %s (%s) was never deleted", id, d.notice)
		}
	}
	return sent, deletes
}

// completions counts the CompleteLifecycleAction calls for a token's action (named by the
// token, or by its instance as Lifeboat names it): accepted ones, and ones Auto Scaling
// refused because the action was over (a tolerated repeat).
type completions struct{ accepted, refused, failed int }

func (q *queues) completions(token string) completions {
	var c completions
	instance := q.fake.LifecycleActionInstance(token)
	for _, call := range q.fake.Calls() {
		byToken := call.Params.Get("LifecycleActionToken")
		if call.Action != "CompleteLifecycleAction" || !(byToken == token || byToken == "" && call.Params.Get("InstanceId") == instance) {
			continue
		}
		switch call.ErrorCode {
		case "":
			c.accepted++
		case "ValidationError": // "No active Lifecycle Action found": the only one a well-formed call gets
			c.refused++
		default:
			c.failed++ // injected faults
		}
	}
	return c
}

// checkCompleted fails the test unless the token's action was completed (CONTINUE) by exactly
// one accepted call; it returns the refused repeats.
func (q *queues) checkCompleted(t testing.TB, token string) int {
	t.Helper()
	result, completed, _, _ := q.fake.LifecycleAction(token)
	c := q.completions(token)
	if !completed || result != "CONTINUE" || c.accepted != 1 {
		t.Errorf("lifecycle action %s: completed %v (%s) by %d accepted calls, want exactly 1 CONTINUE", token, completed, result, c.accepted)
	}
	return c.refused
}

// controllerEnv is the environment of `lifeboat controller` on this queue.
func (q *queues) controllerEnv(queue, kubeconfig, podName string, extra ...string) []string {
	return append([]string{
		"KUBECONFIG=" + kubeconfig, "QUEUE_URL=" + q.sqs.QueueURLs[queue], "AWS_REGION=us-east-1", "AWS_ENDPOINT=" + q.fake.URL(),
		"CLUSTER_NAME=" + clusterName, "NAMESPACE=kube-system", "POD_NAME=" + podName, "NODE_NAME=controller-host",
	}, extra...)
}
