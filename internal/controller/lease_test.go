// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestFailedWorkLoopReleasesLease: when the leader's work loop ends by itself (here it cannot
// consume a queue it was not given), the replica gives up the Lease at once and returns the
// error, so a standby takes over within its retry period instead of never (the Lease renewed
// for a leader that does nothing) or after the Lease's 15 s.
func TestFailedWorkLoopReleasesLease(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	const namespace = "kube-system"
	// No QUEUE_URL: Run starts (informers synced, reconciler running) and its consumer refuses.
	cfg := sandboxtest.Config(t, config.Mode(""), "POD_NAME", "leader-0", "NAMESPACE", namespace, "AWS_REGION", "us-east-1")
	awsCfg := sandboxtest.AWSConfig("http://127.0.0.1:1") // never called
	logs := &sandboxtest.LogBuffer{}
	ctl := controller.New(controller.Options{Config: cfg, Client: kubernetes.NewForConfigOrDie(c.AdminConfig), Queue: awssqs.NewFromConfig(awsCfg), EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg), Logger: slog.New(slog.NewTextHandler(logs, nil))})

	holder := func() string {
		l, err := c.Client.CoordinationV1().Leases(namespace).Get(ctx, config.DefaultLeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	// A standby campaigning for the same Lease, checking every 200 ms.
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, config.DefaultLeaseName,
		c.Client.CoreV1(), c.Client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: "standby-1"})
	if err != nil {
		t.Fatal(err)
	}
	standbyLeads := make(chan time.Time, 1)
	standbyCtx, stopStandby := context.WithCancel(ctx)
	standbyDone := make(chan struct{})
	standbyStarted := false
	defer func() {
		stopStandby()
		if standbyStarted {
			<-standbyDone
		}
	}()

	done := make(chan error, 1)
	go func() { done <- ctl.RunWithLeaderElection(ctx) }()
	// The standby starts once the controller leads, so that it is the one that has to wait. The
	// work loop may fail, and the Lease be given back, between two looks at the Lease.
	var (
		returned time.Time
		runErr   error
	)
	for returned.IsZero() && holder() != "leader-0" {
		select {
		case runErr = <-done:
			returned = time.Now()
			if !strings.Contains(logs.String(), "msg=leading") {
				t.Fatalf("RunWithLeaderElection returned %v before leading\n%s", runErr, logs.String())
			}
		case <-ctx.Done():
			t.Fatal("the controller never took the Lease")
		case <-time.After(20 * time.Millisecond):
		}
	}
	standbyStarted = true
	go func() {
		defer close(standbyDone)
		leaderelection.RunOrDie(standbyCtx, leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 200 * time.Millisecond,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { standbyLeads <- time.Now() },
				OnStoppedLeading: func() {},
			},
		})
	}()

	if returned.IsZero() {
		select {
		case runErr = <-done:
			returned = time.Now()
		case <-time.After(20 * time.Second):
			t.Fatalf("RunWithLeaderElection still running 20 s after its work loop failed (the Lease held by %q)\n%s", holder(), logs.String())
		}
	}
	if runErr == nil {
		t.Error("RunWithLeaderElection returned nil after its work loop failed, want the error")
	}
	t.Logf("RunWithLeaderElection returned: %v", runErr)
	if h := holder(); h != "" && h != "standby-1" {
		t.Errorf("after returning, the Lease is held by %q, want it released", h)
	}
	select {
	case at := <-standbyLeads:
		took := at.Sub(returned)
		t.Logf("the standby led %s after the controller returned", took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("the standby took over %s after the controller returned, want within a few retry periods", took)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("the standby never took over (the Lease held by %q)", holder())
	}
}

// Two releases in one namespace (a trial beside the real one) each lead with their own Lease
// (LEADER_ELECTION_LEASE_NAME, which the chart derives from the release): neither waits as a
// standby of the other.
func TestTwoReleasesLeadIndependently(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	leaders := map[string]*metrics.Metrics{}
	for _, lease := range []string{"lifeboat-controller", "trial-lifeboat-controller"} {
		cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", w.queueURL,
			"AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(), "CLUSTER_NAME", "sandbox", "POD_NAME", lease+"-0",
			"LEADER_ELECTION_LEASE_NAME", lease)
		m := metrics.New()
		leaders[lease] = m
		awsCfg := sandboxtest.AWSConfig(w.fake.URL())
		ctl := controller.New(controller.Options{Config: cfg, Client: w.c.Client, Queue: w.queue, EC2: controlleronly.NewAWSEC2(awsCfg),
			AutoScaling: cloud.NewAWSAutoScaling(awsCfg), Logger: slog.New(slog.NewTextHandler(w.logs, nil)), Metrics: m})
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ctl.RunWithLeaderElection(runCtx) }()
		t.Cleanup(func() { stop(); <-done })
	}
	for lease, m := range leaders {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := w.c.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil {
				return false, nil
			}
			return *l.Spec.HolderIdentity == lease+"-0" && m.Value("lifeboat_leader") == 1, nil
		})
		if err != nil {
			t.Errorf("the release with Lease %s does not lead (lifeboat_leader %v)", lease, m.Value("lifeboat_leader"))
		}
	}
}
