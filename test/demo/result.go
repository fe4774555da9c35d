// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/test/sandbox"
)

// Result is what the scenario did, for the summary, the picture and tests. Times count from
// the injection of the first notice; -1 means never observed.
type Result struct {
	Setup   time.Duration // start until the notices were injected
	Total   time.Duration // start until the summary
	Cases   []Case        // node A (agent), node B (controller)
	Foreign Foreign
	Quiet   Quiet // node C, which had no notice
	// CompleteCalls counts every CompleteLifecycleAction call the fake Auto Scaling received.
	CompleteCalls int
	Counted       []string // what the processes counted: their metrics' samples not at 0 (scrapeCounted)
	// MidDrain is the `lifeboat status` run when a budget first held a pod.
	MidDrain MidDrainStatus
	// Relaxed is when checkout's owner relaxed its budget, which allowed no disruption
	// before; nil if it never did.
	Relaxed  *Relaxation
	Problems []string // every way the run differs from what Lifeboat promises
	Files    Files
}

// Case is one node's interruption.
type Case struct {
	Name, Title, Node, InstanceID string
	Handler                       string // "agent" or "controller"
	Notice, Cordoned, Drained     time.Duration
	// Drained is when the last evicted pod was gone; Recorded when Lifeboat wrote the drain
	// as done on the Node.
	Recorded time.Duration
	// Completed is the first successful CompleteLifecycleAction for the case's hook.
	Completed time.Duration
	HasHook   bool
	// Completions counts CompleteLifecycleAction calls for the hook; LifecycleResult is the
	// fake Auto Scaling's state of the action afterwards ("" while pending).
	Completions     int
	LifecycleResult string
	Evicted         []EvictedPod
	Skipped         []SkippedPod
	// Blocked lists the pods a PodDisruptionBudget held, as the handler logged them.
	Blocked []BlockedPod
	// Left lists pods still on the node at the end that a drain should have evicted.
	Left []string
	// OnNodeAtCompletion lists pods a drain should have evicted that were still on the node,
	// terminating or not, when the lifecycle action was completed (asked of the API server
	// as the call arrived).
	OnNodeAtCompletion []string
	DrainLog           string // the handler's "drain finished" line, shortened
	// Detach is what the node held besides its pods (node B only; nil otherwise).
	Detach *Detach
	// Events are the node's Events as `kubectl describe node` lists them, oldest first.
	Events []sandbox.NodeEvent
}

// Detach is what stood between a drained node and the hand-back of its instance: its place
// in a load balancer's target group and a stateful pod's volume, and the handler's waits.
type Detach struct {
	Target, TargetGroup string // the instance, in that group
	// Deregistered is when the instance left the group (the Auto Scaling group's doing) and
	// began draining; TargetGone when its draining was over.
	Deregistered, TargetGone time.Duration
	Volume, Attachment, Pod  string // the volume, its VolumeAttachment to the node, its pod
	// PodGone is when the pod was gone; Detached when the VolumeAttachment was.
	PodGone, Detached time.Duration
	Waits             []DetachWait // as the handler logged them
	// DrainingAtCompletion and AttachedAtCompletion name the target still draining and the
	// volumes still attached when the CompleteLifecycleAction call arrived (asked of the fake
	// and the API server at that moment).
	DrainingAtCompletion, AttachedAtCompletion []string
}

// DetachWait is how one hand-back wait ended, from the handler's log.
type DetachWait struct {
	Wait    string // "targets" or "volumes"
	Outcome string // WaitReleased, WaitCut or WaitSkipped
	// Took is how long it waited; 0 for a wait over in under a second, which Lifeboat logs
	// without its time.
	Took time.Duration
	// Logged is when the handler logged its end, from the first notice: once every wait of
	// the hand-back is over (they run together, so the longest one started at Logged-Took).
	Logged time.Duration
	Held   string // what was still held when the deadline cut it
}

// How a hand-back wait ends.
const (
	WaitReleased = "released"
	WaitCut      = "cut"
	WaitSkipped  = "skipped"
)

// waitPurpose says what each hand-back wait is for.
var waitPurpose = map[string]string{"targets": "load-balancer targets to drain", "volumes": "volumes to detach"}

func (hw DetachWait) String() string {
	what := cmp.Or(waitPurpose[hw.Wait], hw.Wait)
	switch {
	case hw.Outcome == WaitCut:
		return fmt.Sprintf("%s for %s, then cut by the deadline (still held: %s)", secs(hw.Took), what, orDash(hw.Held))
	case hw.Outcome == WaitSkipped:
		return "no time for " + what + " (skipped: it cannot be checked)"
	case hw.Took < time.Second:
		return "under a second for " + what
	}
	return fmt.Sprintf("%s for %s", secs(hw.Took), what)
}

// wait returns the handler's wait of the name, if it logged one.
func (h *Detach) wait(name string) (DetachWait, bool) {
	for _, w := range h.Waits {
		if w.Wait == name {
			return w, true
		}
	}
	return DetachWait{}, false
}

// EvictedPod is a pod the drain evicted.
type EvictedPod struct {
	Pod, Tier     string
	Evicted, Gone time.Duration
	// Attempts counts eviction requests for the pod in the audit log; Refused those the API
	// server answered 429 (the PodDisruptionBudget allowed no disruption then).
	Attempts, Refused int
	// Arrived marks a pod placed on the node after the notices were injected: a replacement
	// for a pod of the other node, scheduled here before this node was cordoned.
	Arrived bool
}

// SkippedPod is a pod that stayed on its node, and the reason the drain logged.
type SkippedPod struct{ Pod, Tier, Reason string }

// Foreign is the notice about another cluster's instance.
type Foreign struct {
	InstanceID      string
	Notice, Refused time.Duration
	Reason          string // from the controller's log
	// CompleteCalls counts CompleteLifecycleAction calls naming the instance or its token.
	CompleteCalls   int
	ActionCompleted bool
	// RetryAfter is when the controller lets its message come back (it is not deleted, since
	// DELETE_SQS_MSG_IF_NODE_NOT_FOUND is false: it may be another cluster's to handle).
	RetryAfter time.Duration
	// InFlight counts the queue's messages received and not deleted: the foreign one.
	InFlight int
}

// Quiet is the node without a notice.
type Quiet struct {
	Node    string
	Touched string // how Lifeboat changed it; "" when it did not
	Evicted []string
}

// Files are where the run wrote things.
type Files struct{ Dir, Timeline, Summary, AgentLog, ControllerLog, Sandbox string }

// summarize turns the observations into a Result and checks it.
func summarize(ctx context.Context, e *env, o observed, midDrain MidDrainStatus, procs []*process, lanes []lane) (*Result, error) {
	attempts, refused, err := evictionAttempts(e.cluster)
	if err != nil {
		return nil, err
	}
	res := &Result{MidDrain: midDrain, Relaxed: o.relaxed}
	for i, l := range lanes[:2] {
		c := Case{Name: l.name, Node: l.node, InstanceID: l.instance, HasHook: l.token != "",
			Notice: o.first(l.name, EventNotice), Cordoned: o.first(l.name, EventCordoned), Drained: -1,
			Recorded: o.first(l.name, EventDrained), Completed: -1}
		if i == 0 {
			c.Title, c.Handler = "spot interruption, instance metadata", "agent"
		} else {
			c.Title, c.Handler = "Auto Scaling terminate hook, SQS", "controller"
		}
		gone := map[string]time.Duration{}
		for _, ev := range o.events {
			if ev.Lane == l.name && ev.Kind == EventGone {
				gone[ev.Pod] = ev.At
			}
		}
		for _, ev := range o.events {
			if ev.Lane != l.name {
				continue
			}
			switch ev.Kind {
			case EventEvicted:
				g, ok := gone[ev.Pod]
				if !ok {
					g = -1
				}
				arrived := !slices.ContainsFunc(o.before[l.name], func(p podInfo) bool { return p.Name == ev.Pod })
				c.Evicted = append(c.Evicted, EvictedPod{Pod: ev.Pod, Tier: ev.Tier, Evicted: ev.At, Gone: g,
					Attempts: attempts[ev.Pod], Refused: refused[ev.Pod], Arrived: arrived})
				c.Drained = max(c.Drained, g)
			case EventCompleted:
				c.Completions++
				if c.Completed < 0 && !strings.Contains(ev.Detail, "refused") {
					c.Completed = ev.At
				}
			}
		}
		for _, p := range o.before[l.name] {
			if !slices.ContainsFunc(c.Evicted, func(ev EvictedPod) bool { return ev.Pod == p.Name }) {
				c.Skipped = append(c.Skipped, SkippedPod{Pod: p.Name, Tier: p.Tier, Reason: o.skipped[p.Name]})
			}
		}
		c.Blocked = budgetHolds(o.events, l.name)
		if l.targetGroup != "" {
			c.Detach = detachOf(o, l, c.Evicted)
		}
		if c.HasHook {
			c.LifecycleResult, _, _, _ = e.aws.LifecycleAction(l.token)
			held, seen := e.heldWhenCompleted(c.InstanceID)
			if !seen && c.Completions > 0 {
				unknown := []string{"(unknown: the completion call was not looked at as it arrived)"}
				held = heldAtCompletion{pods: unknown, draining: unknown, attached: unknown}
			}
			c.OnNodeAtCompletion = held.pods
			if c.Detach != nil {
				c.Detach.DrainingAtCompletion, c.Detach.AttachedAtCompletion = held.draining, held.attached
			}
		}
		if c.Left, err = leftOnNode(ctx, e, l.node); err != nil {
			return nil, err
		}
		if c.Events, err = nodeEventsOf(ctx, e, l.node, o.start.Truncate(time.Second), story(c), 5*time.Second); err != nil {
			return nil, err
		}
		if d := o.drainLogs[l.name]; d != nil {
			c.DrainLog = fmt.Sprintf("selected %v, skipped %v, remaining %v, %.2fs", d["selected"], d["skipped"], d["remaining"], d["seconds"])
		}
		res.Cases = append(res.Cases, c)
	}

	f := lanes[2]
	ref := o.refusals[f.instance]
	res.Foreign = Foreign{InstanceID: f.instance, Notice: o.first(f.name, EventNotice), Refused: o.first(f.name, EventRefused),
		Reason: ref.reason, RetryAfter: ref.retryDelay}
	for _, c := range e.aws.Calls() {
		if c.Action != "CompleteLifecycleAction" {
			continue
		}
		res.CompleteCalls++
		if c.Params.Get("InstanceId") == f.instance || c.Params.Get("LifecycleActionToken") == f.token {
			res.Foreign.CompleteCalls++
		}
	}
	_, res.Foreign.ActionCompleted, _, _ = e.aws.LifecycleAction(f.token)
	if res.Foreign.InFlight, err = messagesInFlight(ctx, e); err != nil {
		return nil, err
	}

	quiet := lanes[3]
	res.Quiet = Quiet{Node: quiet.node}
	n, err := e.client.CoreV1().Nodes().Get(ctx, quiet.node, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var touched []string
	if n.Spec.Unschedulable {
		touched = append(touched, "cordoned")
	}
	for k := range n.Annotations {
		if strings.HasPrefix(k, nodes.AnnotationPrefix) {
			touched = append(touched, "annotation "+k)
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key != "node.kubernetes.io/unschedulable" {
			touched = append(touched, "taint "+t.Key)
		}
	}
	res.Quiet.Touched = strings.Join(touched, ", ")
	for _, ev := range o.events {
		if ev.Lane == quiet.name && ev.Kind == EventEvicted {
			res.Quiet.Evicted = append(res.Quiet.Evicted, ev.Pod)
		}
	}
	for _, p := range procs {
		res.Counted = append(res.Counted, scrapeCounted(ctx, p)...)
	}
	res.Problems = check(res, procs)
	return res, nil
}

// detachOf is what the lane's node held besides its pods, as observed.
func detachOf(o observed, l lane, evicted []EvictedPod) *Detach {
	h := &Detach{Target: l.instance, TargetGroup: l.targetGroup, Volume: volumeName, Attachment: attachmentName, Pod: statefulPodKey,
		Deregistered: o.first(l.name, EventDeregistered), TargetGone: o.first(l.name, EventTargetGone),
		PodGone: -1, Detached: o.first(l.name, EventDetached), Waits: o.waits[l.name]}
	for _, p := range evicted {
		if p.Pod == statefulPodKey {
			h.PodGone = p.Gone
		}
	}
	return h
}

// leftOnNode lists the pods on a drained node that a drain evicts: neither DaemonSet nor
// mirror pods, nor Lifeboat's own, nor on their way out. (A quorum read.)
func leftOnNode(ctx context.Context, e *env, node string) ([]string, error) {
	return podsToEvict(ctx, e, node, false)
}

// podsToEvict lists the pods on the node that a drain evicts (workloads and critical pods,
// not Lifeboat's own), with terminating ones when terminating is set.
func podsToEvict(ctx context.Context, e *env, node string, terminating bool) ([]string, error) {
	pods, err := e.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list the pods on %s: %w", node, err)
	}
	var left []string
	for _, p := range pods.Items {
		tier := tierOf(&p)
		if (terminating || p.DeletionTimestamp == nil) && (tier == TierWorkload || tier == TierCritical) && p.Name != ControllerPodName {
			left = append(left, p.Namespace+"/"+p.Name)
		}
	}
	return left, nil
}

// evictionAttempts counts eviction requests per pod from the API server's audit log.
func evictionAttempts(c *sandbox.Cluster) (attempts, refused map[string]int, err error) {
	events, err := c.AuditEvents(func(e sandbox.AuditEvent) bool {
		return (e.User.Username == agentUser || e.User.Username == controllerUser) && e.Verb == "create" &&
			e.ObjectRef != nil && e.ObjectRef.Subresource == "eviction"
	})
	if err != nil {
		return nil, nil, err
	}
	attempts, refused = map[string]int{}, map[string]int{}
	for _, e := range events {
		key := e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
		attempts[key]++
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 429 {
			refused[key]++
		}
	}
	return attempts, refused, nil
}

// messagesInFlight counts the queue's messages that were received and not deleted (hidden
// until their visibility timeout ends).
func messagesInFlight(ctx context.Context, e *env) (int, error) {
	q := awssqs.NewFromConfig(awsConfig(e.aws.URL()))
	name := sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible
	out, err := q.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(e.queueURL), AttributeNames: []sqstypes.QueueAttributeName{name}})
	if err != nil {
		return 0, fmt.Errorf("queue attributes: %w", err)
	}
	n, err := strconv.Atoi(out.Attributes[string(name)])
	if err != nil {
		return 0, fmt.Errorf("queue attribute %s=%q: %w", name, out.Attributes[string(name)], err)
	}
	return n, nil
}
