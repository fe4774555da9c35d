// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// Names the scenario gives the sandbox's AWS side.
const (
	ClusterName    = "sandbox"
	managedTag     = "aws-node-termination-handler/managed"
	ourGroup       = "sandbox-workers"
	foreignGroup   = "other-workers"
	hookName       = "lifeboat-drain"
	queueName      = "lifeboat"
	foreignID      = "i-0f0f0f0f0f0f0f0f0"
	foreignDNSName = "ip-10-9-0-1.ec2.internal"
	spotPath       = "/latest/meta-data/spot/instance-action"
)

// env is the running sandbox: the control plane with three kwok nodes backed by fake EC2
// instances, node A's instance metadata (behind a proxy that hides the spot notice until it
// is injected), the SQS queue, and the fake EC2 / Auto Scaling / ELBv2 endpoint in front of
// it, with node B's instance in a load balancer's target group.
type env struct {
	dir      string
	cluster  *sandbox.Cluster
	client   kubernetes.Interface // admin; API warnings silenced
	nodes    []*corev1.Node       // A, B, C
	imdsA    *sandbox.IMDSProxy
	queue    *sandbox.SQS
	queueURL string
	aws      *fakeaws.Server
	stops    []func()
	// targetGroup is the ARN of the load balancer's target group that node B's instance is in.
	targetGroup string

	// atCompletion holds, by instance, what its node still held when its first
	// CompleteLifecycleAction arrived: read from the API server and the fake at that moment,
	// so the check does not depend on how late the demo's own watch sees the changes.
	completionMu sync.Mutex
	atCompletion map[string]heldAtCompletion
}

// heldAtCompletion is what a node still held as its lifecycle action was completed.
type heldAtCompletion struct {
	// pods a drain should have evicted that were still on the node, terminating or not
	pods []string
	// draining names the instance's place in the target group while not gone; attached the
	// volumes still attached to the node.
	draining, attached []string
}

// watchCompletions looks at the node of each CompleteLifecycleAction as the call arrives.
func (e *env) watchCompletions() {
	e.atCompletion = map[string]heldAtCompletion{}
	nodeOf := map[string]string{}
	for _, n := range e.nodes {
		nodeOf[episode.InstanceIDOf(n)] = n.Name
	}
	e.aws.OnCall(func(c fakeaws.Call) {
		if c.Action != "CompleteLifecycleAction" {
			return
		}
		instance := c.Params.Get("InstanceId") // Lifeboat names the action by its token
		if token := c.Params.Get("LifecycleActionToken"); token != "" {
			instance = e.aws.LifecycleActionInstance(token)
		}
		if nodeOf[instance] == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		left, err := podsToEvict(ctx, e, nodeOf[instance], true)
		if err != nil {
			left = []string{"(cannot tell: " + err.Error() + ")"}
		}
		held := heldAtCompletion{pods: left}
		held.draining, held.attached = e.detachAtCompletion(ctx, instance, nodeOf[instance])
		e.completionMu.Lock()
		defer e.completionMu.Unlock()
		if _, seen := e.atCompletion[instance]; !seen {
			e.atCompletion[instance] = held
		}
	})
}

// heldWhenCompleted is what watchCompletions saw for the instance; seen is false when no
// completion call for it arrived.
func (e *env) heldWhenCompleted(instance string) (held heldAtCompletion, seen bool) {
	e.completionMu.Lock()
	defer e.completionMu.Unlock()
	held, seen = e.atCompletion[instance]
	return held, seen
}

// startEnv starts every part of the sandbox in dir. On error what was started is stopped.
func startEnv(ctx context.Context, tools sandbox.Tools, dir string) (e *env, err error) {
	e = &env{dir: dir}
	defer func() {
		if err != nil {
			e.stop()
		}
	}()
	// The controller manager and scheduler make the workloads real: DaemonSet and ReplicaSet
	// controllers create the pods, the scheduler places them and their replacements, and
	// the disruption controller keeps the PodDisruptionBudget's status, without which every
	// eviction it covers is refused.
	e.cluster, err = sandbox.StartCluster(ctx, tools, sandbox.ClusterOptions{Dir: dir, AuditLog: true, ControllerManager: true, Scheduler: true})
	if err != nil {
		return nil, err
	}
	e.stops = append(e.stops, e.cluster.Stop)
	// The kube-proxy mirror pods are named after their node, dots and all, as the kubelet
	// names them; the API server's warning about that would only clutter the output.
	rc := rest.CopyConfig(e.cluster.AdminConfig)
	rc.WarningHandler = rest.NoWarnings{}
	if e.client, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}

	specs := []sandbox.NodeSpec{{Index: 1, Zone: "us-east-1a"}, {Index: 2, Zone: "us-east-1b"}, {Index: 3, Zone: "us-east-1c"}}
	if e.nodes, err = e.cluster.AddNodes(ctx, specs...); err != nil {
		return nil, err
	}

	if e.queue, err = sandbox.StartSQS(ctx, tools, dir, sandbox.SQSOptions{Queues: []string{queueName}, VisibilityTimeout: 10}); err != nil {
		return nil, err
	}
	e.stops = append(e.stops, e.queue.Stop)
	e.queueURL = e.queue.QueueURLs[queueName]

	e.aws = fakeaws.New(fakeaws.Options{SQSBackend: e.queue.Endpoint})
	if err := e.aws.Start(); err != nil {
		return nil, err
	}
	e.stops = append(e.stops, e.aws.Close)
	// The EventBridge rules and queue policy deploy/aws ships: the controller's set-up check
	// finds them (try `DeleteRule` from a test to see it said).
	e.aws.ShipSetup(e.queueURL, sandbox.QueueARN(e.queueURL), sandbox.ShippedKinds())
	e.watchCompletions()
	ours := map[string]string{managedTag: "", "kubernetes.io/cluster/" + ClusterName: "owned"}
	for i, n := range e.nodes {
		e.aws.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, AvailabilityZone: specs[i].Zone,
			InstanceType: "m5.large", AutoScalingGroup: ourGroup, Tags: ours})
	}
	// Another cluster's instance, as an account-wide EventBridge rule or a shared queue
	// would report it: it carries the managed tag too, but no node here is backed by it.
	e.aws.AddInstance(fakeaws.Instance{ID: foreignID, PrivateDNSName: foreignDNSName, AvailabilityZone: "us-east-1a", InstanceType: "m5.large",
		AutoScalingGroup: foreignGroup, Tags: map[string]string{managedTag: "", "kubernetes.io/cluster/other": "owned"}})
	// A heartbeat timeout of 300 s puts the deadline far beyond the drain and the hand-back
	// waits (the target group's 10 s delay), so no wait is cut.
	for _, g := range []string{ourGroup, foreignGroup} {
		e.aws.AddLifecycleHook(fakeaws.LifecycleHook{Name: hookName, AutoScalingGroup: g, HeartbeatTimeout: 300})
	}
	if err := e.addTargetGroup(episode.InstanceIDOf(e.nodes[1])); err != nil {
		return nil, err
	}

	// Node A's metadata reports a spot interruption (terminate) two minutes after each
	// request, as an instance sees it once EC2 has decided; the proxy hides it until the
	// scenario shows it. (The mock restates the time on every request; Lifeboat must still
	// see one notice.)
	a := e.nodes[0]
	m, err := sandbox.StartIMDS(ctx, tools, dir, sandbox.IMDSOptions{Name: "imds-node-a", InstanceID: episode.InstanceIDOf(a),
		Zone: specs[0].Zone, Hostname: a.Name, Args: []string{"spot", "-a", "terminate"}})
	if err != nil {
		return nil, err
	}
	e.stops = append(e.stops, m.Stop)
	if e.imdsA, err = sandbox.NewIMDSProxy(m.URL); err != nil {
		return nil, err
	}
	e.stops = append(e.stops, e.imdsA.Close)
	e.imdsA.Hide(spotPath)
	return e, nil
}

// stop stops everything, newest first.
func (e *env) stop() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	e.stops = nil
}

// kubeconfigFor writes a kubeconfig for a user of its own, so the audit log tells the
// agent's requests from the controller's. (system:masters: the demo is not about RBAC.)
func (e *env) kubeconfigFor(user string) (string, error) {
	rc, err := e.cluster.UserConfig(user, "system:masters")
	if err != nil {
		return "", err
	}
	path := filepath.Join(e.dir, user+".kubeconfig")
	return path, e.cluster.WriteKubeconfig(path, rc)
}

// prepareOutput makes dir and removes what an earlier run left there.
func prepareOutput(dir string) error {
	if dir == "" {
		return errors.New("no output directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output directory %s: %w", dir, err)
	}
	for _, name := range []string{"agent.log", "controller.log", "timeline.svg", "summary.txt"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
