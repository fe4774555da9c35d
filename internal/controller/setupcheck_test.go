// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The wiring tells on itself: with the set-up deploy/aws ships (a rule per notice kind, a
// queue policy that lets EventBridge send), the check finds nothing. A Spot rule deleted from
// the sandbox's EventBridge is said on the next check (a Warning Event on Lifeboat's pod
// naming the kind, the metric), and said gone once it is back.
func TestSetupCheckReportsADeletedRule(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	queueARN := sandbox.QueueARN(w.queueURL)
	spotRule := w.fake.ShipSetup(w.queueURL, queueARN, sandbox.ShippedKinds())["spot interruption"]
	if spotRule == "" {
		t.Fatal("no Spot rule shipped")
	}
	w.wire = func(o *controller.Options) {
		o.Setup, o.SetupCheckEvery = controlleronly.NewAWSSetup(sandboxtest.AWSConfig(w.fake.URL())), 300*time.Millisecond
	}
	w.run(t, ctx, "POD_NAME", "lifeboat-controller-0")
	problems := func(check string) float64 {
		return w.metrics.Value("lifeboat_aws_setup_problems", "check", check)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s:\n%s", what, w.logs.String())
		}
	}
	waitFor("the first check", func() bool { return w.fake.CallCount("events", "DescribeRule") >= len(messages.EventKinds()) })
	if p := problems("rules") + problems("queue_policy") + problems("permission"); p != 0 {
		t.Fatalf("the shipped set-up: %v problems, want none\n%s", p, w.logs.String())
	}

	w.fake.DeleteRule(spotRule)
	waitFor("the deleted rule counted", func() bool { return problems("rules") == 1 })
	var said []string
	waitFor("the Event", func() bool {
		list, _ := w.c.Client.CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{})
		said = said[:0]
		for _, e := range list.Items {
			if e.Reason == events.ReasonAWSSetupProblem && e.InvolvedObject.Name == "lifeboat-controller-0" {
				said = append(said, e.Message)
			}
		}
		return len(said) > 0
	})
	if len(said) != 1 || !strings.Contains(said[0], "EC2 Spot Instance Interruption Warning") {
		t.Errorf("Events on Lifeboat's pod %q, want one naming the Spot warning's kind", said)
	}

	w.fake.PutRule(fakeaws.Rule{Name: spotRule, Targets: []string{queueARN}, State: "DISABLED",
		EventPattern: `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`})
	waitFor("the disabled rule said", func() bool { return strings.Contains(w.logs.String(), "is disabled") })
	w.fake.PutRule(fakeaws.Rule{Name: spotRule, Targets: []string{queueARN},
		EventPattern: `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`})
	waitFor("the problem gone", func() bool { return problems("rules") == 0 && strings.Contains(w.logs.String(), "problem is gone") })

	// Hooks in use: the node's group has a terminate hook; a node that joins in a group
	// without one is said.
	node := w.nodes[0]
	w.fake.RemoveInstance(episode.InstanceIDOf(node))
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(node), PrivateDNSName: node.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	w.fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
	joined, err := w.c.AddNodes(ctx, sandbox.NodeSpec{Index: 40})
	if err != nil {
		t.Fatal(err)
	}
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(joined[0]), PrivateDNSName: joined[0].Name, Tags: ourTags, AutoScalingGroup: "batch"})
	waitFor("the group without a hook said", func() bool {
		return problems("hooks") == 1 && strings.Contains(w.logs.String(), "group batch of this cluster's nodes has no terminate lifecycle hook")
	})
}
