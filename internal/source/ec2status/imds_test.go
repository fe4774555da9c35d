// SPDX-License-Identifier: Apache-2.0

package ec2status_test

import (
	"context"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/source/ec2status"
	"lifeboat.dev/lifeboat/internal/source/imds"
)

type metadata map[string]string

func (m metadata) Get(_ context.Context, path string) ([]byte, bool, error) {
	body, ok := m[path]
	return []byte(body), ok, nil
}

type listed []cloud.InstanceStatus

func (l listed) DescribeInstanceStatus(context.Context, []string) ([]cloud.InstanceStatus, error) {
	return l, nil
}

// The agent reads a scheduled event from instance metadata and the controller from
// DescribeInstanceStatus: both name it the same notice, so the Node's record holds it once.
func TestSameEventSameNoticeAsInstanceMetadata(t *testing.T) {
	const instance = "i-0123456789abcdef0"
	md := metadata{imds.PathScheduled: `[{"NotBefore":"21 Nov 2026 12:00:00 GMT","Code":"system-reboot","Description":"scheduled reboot",` +
		`"EventId":"instance-event-0d59937288b749b32","NotAfter":"21 Nov 2026 14:00:00 GMT","State":"active"}]`}
	agent := imds.NewPoller(md, instance, imds.Options{Scheduled: true, Interval: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make(chan notice.Notice, 1)
	go agent.Run(ctx, out)
	var fromMetadata notice.Notice
	select {
	case fromMetadata = <-out:
		cancel()
	case <-ctx.Done():
		t.Fatal("instance metadata's event was not read")
	}

	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	controller, err := ec2status.New(ec2status.Options{Interval: time.Second, Instances: func() []string { return []string{instance} },
		API: listed{{InstanceID: instance, Instance: "ok", System: "ok", Events: []cloud.ScheduledEvent{{ID: "instance-event-0d59937288b749b32",
			Code: "system-reboot", Description: "scheduled reboot", NotBefore: start, NotAfter: start.Add(2 * time.Hour)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := controller.Pass(context.Background())
	if err != nil || len(ns) != 1 {
		t.Fatalf("%+v %v", ns, err)
	}
	got := ns[0]
	if got.ID != fromMetadata.ID || got.Kind != fromMetadata.Kind || got.Action != fromMetadata.Action || !got.Deadline.Equal(fromMetadata.Deadline) {
		t.Errorf("DescribeInstanceStatus: %s %s %s %v; instance metadata: %s %s %s %v",
			got.ID, got.Kind, got.Action, got.Deadline, fromMetadata.ID, fromMetadata.Kind, fromMetadata.Action, fromMetadata.Deadline)
	}
}
