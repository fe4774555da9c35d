// SPDX-License-Identifier: Apache-2.0

// Package demo runs Lifeboat's end-to-end demonstration against the local sandbox: three
// kwok nodes running a DaemonSet, two Deployments under PodDisruptionBudgets (one allowing no
// disruption until the demo, as its owner, relaxes it mid-drain), a critical Deployment and
// one with emptyDir; the lifeboat binary as an agent for node A and as the controller for
// the cluster; then a spot notice for node A through instance metadata, an Auto Scaling
// terminate hook for node B through the queue, and a hook for an instance of another
// cluster. It prints each step as it is observed, a summary of what happened to
// every notice and pod, and draws the drains on a timeline.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/test/sandbox"
)

// Options configure a run.
type Options struct {
	// OutputDir receives the timeline, the summary and the lifeboat processes' logs.
	OutputDir string
	// Lifeboat is a built lifeboat binary; empty builds one.
	Lifeboat string
	// Hold keeps everything running after the summary until ctx ends.
	Hold bool
	// Out receives the progress lines and the summary; nil means os.Stdout.
	Out io.Writer
	// HandlingTimeout bounds the wait for every case to be handled; default 90 s.
	HandlingTimeout time.Duration
}

// simulated says, before anything runs, which parts are stand-ins.
const simulated = `Real: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the SQS server (goaws),
and the lifeboat binary (agent and controller, as local processes).
Simulated: the kubelets (kwok), EC2, Auto Scaling and the load balancer's target group (a fake
that records every call; the demo deregisters node B's instance from the group as Auto Scaling
begins terminating it), instance metadata (amazon-ec2-metadata-mock; a proxy holds the spot
notice back until it is injected), the kube-proxy static pods (mirror pods written by the
demo), the controller's own pod (a stand-in on node B), and the attach/detach controller (the
demo deletes the VolumeAttachment of db-0's volume 2s after the pod is gone).`

// Run runs the scenario and returns what happened. The error is for failures to run it at
// all; a case not handled as expected is listed in Result.Problems.
func Run(ctx context.Context, opts Options) (_ *Result, err error) {
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	if opts.HandlingTimeout == 0 {
		opts.HandlingTimeout = 90 * time.Second
	}
	begin := time.Now()
	if err := prepareOutput(opts.OutputDir); err != nil {
		return nil, err
	}
	tools, err := sandbox.FindTools()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lifeboat-demo-")
	if err != nil {
		return nil, err
	}
	// The components' logs are kept for a look when something went wrong.
	keepDir := false
	defer func() {
		switch {
		case err != nil && ctx.Err() == nil:
			err = fmt.Errorf("%w (sandbox files kept in %s)", err, dir)
		case !keepDir:
			os.RemoveAll(dir)
		}
	}()
	fmt.Fprintf(out, "%s\n\n", simulated)

	// Build while the sandbox starts.
	type built struct {
		bin string
		err error
	}
	build := make(chan built, 1)
	buildCtx, cancelBuild := context.WithCancel(ctx)
	defer cancelBuild()
	go func() {
		if opts.Lifeboat != "" {
			build <- built{bin: opts.Lifeboat}
			return
		}
		bin, err := BuildLifeboat(buildCtx, dir)
		build <- built{bin, err}
	}()

	fmt.Fprintln(out, "Starting the sandbox: control plane, 3 kwok nodes, instance metadata for node A, SQS, fake EC2 / Auto Scaling / ELBv2 ...")
	e, err := startEnv(ctx, tools, dir)
	if err != nil {
		<-build
		return nil, fmt.Errorf("start the sandbox: %w", err)
	}
	defer e.stop()
	nodeA, nodeB, nodeC := e.nodes[0], e.nodes[1], e.nodes[2]
	lanes := []lane{
		{name: "A", label: "node A", node: nodeA.Name, instance: episode.InstanceIDOf(nodeA)},
		{name: "B", label: "node B", node: nodeB.Name, instance: episode.InstanceIDOf(nodeB), token: tokenB, targetGroup: targetGroupName},
		{name: "foreign", label: "foreign", instance: foreignID, token: tokenForeign},
		{name: "C", label: "node C", node: nodeC.Name, instance: episode.InstanceIDOf(nodeC)},
	}
	fmt.Fprintf(out, "  up after %.1fs\n", time.Since(begin).Seconds())
	fmt.Fprintf(out, "  node A %s  (%s)  spot instance, protected by the agent\n", nodeA.Name, lanes[0].instance)
	fmt.Fprintf(out, "  node B %s  (%s)  Auto Scaling group %s, lifecycle hook %s; in target group %s (deregistration delay %s)\n",
		nodeB.Name, lanes[1].instance, ourGroup, hookName, targetGroupName, targetDelay)
	fmt.Fprintf(out, "  node C %s  (%s)  no notice: must not be touched\n", nodeC.Name, lanes[3].instance)
	fmt.Fprintf(out, "  foreign   %s  in EC2, tagged for cluster \"other\": no node here\n", foreignID)

	fmt.Fprintf(out, "Creating workloads: DaemonSet log-shipper, Deployment web (6, PodDisruptionBudget maxUnavailable 1), checkout (3, PodDisruptionBudget minAvailable 3: no disruption allowed\n"+
		"  until its owner relaxes it, %s after a pod is held), cache (3, emptyDir), coredns (3, system-cluster-critical), kube-proxy mirror pods,\n", ownerRelaxesAfter)
	fmt.Fprintf(out, "  and on node B %s with claim %s (volume %s, attached: VolumeAttachment %s) ...\n", statefulPodKey, claimName, volumeName, attachmentName)
	if err := createWorkloads(ctx, e.client, e.nodes, nodeB.Name); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  running after %.1fs\n", time.Since(begin).Seconds())

	b := <-build
	if b.err != nil {
		return nil, b.err
	}
	fmt.Fprintf(out, "Starting lifeboat agent (node A) and lifeboat controller (%s) ...\n", b.bin)
	w := newWatcher(out, e.client, e.aws, lanes, filepath.Join(opts.OutputDir, "agent.log"), filepath.Join(opts.OutputDir, "controller.log"))
	w.statusBin, w.statusKubeconfig = b.bin, e.cluster.KubeconfigPath
	w.watchTarget(lanes[1].name, e.targetGroup, targetGroupName, lanes[1].instance, targetDelay)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer func() { stopWatch(); w.factory.Shutdown() }()
	if err := w.run(watchCtx); err != nil {
		return nil, err
	}
	go e.detachWhenGone(watchCtx, func(err error) { fmt.Fprintf(out, "  %v\n", err) })
	procs, err := startProcesses(ctx, e, b.bin, opts.OutputDir, nodeA.Name, nodeB.Name)
	defer func() {
		for _, p := range procs {
			if err := p.stop(); err != nil {
				fmt.Fprintf(out, "%s: %v\n", p.name, err)
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	setup := time.Since(begin)
	fmt.Fprintf(out, "Ready after %.1fs. Injecting the notices:\n", setup.Seconds())

	w.begin()
	go func() {
		if err := relaxWhenHeld(watchCtx, e.client, w); err != nil && watchCtx.Err() == nil {
			fmt.Fprintf(out, "  %v\n", err)
		}
	}()
	if err := inject(ctx, e, w, lanes); err != nil {
		return nil, err
	}
	waitErr := waitHandled(ctx, w, procs, opts.HandlingTimeout)
	// A moment more, so a second lifecycle completion or a late eviction would be seen.
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	w.poll()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	midDrain := w.midDrain()
	res, err := summarize(ctx, e, w.snapshot(), midDrain, procs, lanes)
	if err != nil {
		return nil, err
	}
	res.Setup, res.Total = setup, time.Since(begin)
	if waitErr != nil {
		res.Problems = append([]string{waitErr.Error()}, res.Problems...)
	}
	res.Files = Files{Dir: opts.OutputDir, Timeline: filepath.Join(opts.OutputDir, "timeline.svg"), Summary: filepath.Join(opts.OutputDir, "summary.txt"),
		AgentLog: procs[0].logPath, ControllerLog: procs[1].logPath, Sandbox: dir}
	if err := writeTimeline(res.Files.Timeline, res); err != nil {
		return nil, err
	}
	if err := writeSummary(out, res.Files.Summary, res); err != nil {
		return nil, err
	}
	keepDir = len(res.Problems) > 0
	if opts.Hold {
		fmt.Fprintf(out, "\nHolding the sandbox (the agent and controller keep running) until interrupted (Ctrl-C):\n"+
			"  KUBECONFIG=%s\n  AWS_ENDPOINT=%s  (EC2, Auto Scaling, and SQS routed to goaws)\n  QUEUE_URL=%s\n  sandbox files: %s\n",
			e.cluster.KubeconfigPath, e.aws.URL(), e.queueURL, dir)
		<-ctx.Done()
		fmt.Fprintln(out, "Stopping everything.")
	}
	return res, nil
}

// waitHandled waits until node A and node B are drained, node B has left its target group
// and its volume is detached, its lifecycle action is completed, and the foreign notice is
// refused; or until a process dies or time runs out.
func waitHandled(ctx context.Context, w *watcher, procs []*process, timeout time.Duration) error {
	deadline := time.After(timeout)
	goals := []struct {
		lane string
		kind EventKind
	}{{"A", EventDrained}, {"B", EventDrained}, {"B", EventTargetGone}, {"B", EventDetached}, {"B", EventCompleted}, {"foreign", EventRefused}}
	for {
		missing := ""
		for _, g := range goals {
			if !w.reached(g.lane, g.kind) {
				missing += fmt.Sprintf(" %s %s;", g.lane, g.kind)
			}
		}
		if missing == "" {
			return nil
		}
		for _, p := range procs {
			if done, err := p.exited(); done {
				return fmt.Errorf("%s exited (%v) while cases were open:%s see %s", p.name, err, missing, p.logPath)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("not observed within %s:%s", timeout, missing)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
