// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/notice"
)

// corpusAccount is the account the corpus's messages name.
const corpusAccount = "210987654321"

// corpusCase is what one message of testdata/corpus must parse into: notices of a kind (with
// their instances and deadlines), a capacity reservation to look up, an ignore reason, or an
// error.
type corpusCase struct {
	kind        notice.Kind
	instances   []string
	deadline    string // RFC 3339; "" for none
	cordonOnly  bool
	released    bool
	reservation string
	ignored     [2]string // kind, reason
	wantErr     string
	// noAccount: the shape names no AccountId (NTH's tests leave it out; Auto Scaling writes
	// it). Refused when the queue's account is known, read when it is not.
	noAccount bool
}

// corpus: the sample messages of AWS's documentation (aws-*: the EC2 user guide's Spot,
// rebalance, Capacity Reservation and Capacity Block pages, Auto Scaling's lifecycle hooks,
// AWS Health), and the shapes of NTH's (nth-*) and Karpenter's (karpenter-*) tests, written
// here with values of our own.
var corpus = map[string]corpusCase{
	"aws-spot-interruption-terminate.json":                              {kind: notice.SpotInterruption, instances: []string{"i-0c0a5e00000000001"}, deadline: "2026-10-05T08:02:00Z"},
	"aws-spot-interruption-hibernate.json":                              {kind: notice.SpotInterruption, instances: []string{"i-0c0a5e00000000002"}, deadline: "2026-10-05T08:02:00Z"},
	"aws-rebalance-recommendation.json":                                 {kind: notice.Rebalance, instances: []string{"i-0c0a5e00000000003"}},
	"aws-capacity-reservation-interruption.json":                        {kind: notice.CapacityReservationInterruption, instances: []string{"i-0c0a5e00000000004"}, deadline: "2026-10-05T08:04:00Z"},
	"aws-capacity-reservation-interruption-interruptible-spelling.json": {kind: notice.CapacityReservationInterruption, instances: []string{"i-0c0a5e00000000005"}, deadline: "2026-10-05T08:04:00Z"},
	"aws-capacity-reservation-reclamation-completed.json":               {ignored: [2]string{IgnoreCapacityReservationReclaimed, ReasonReclamationCompleted}},
	"aws-capacity-reservation-reclamation-complete-other-spelling.json": {ignored: [2]string{IgnoreCapacityReservationReclaimed, ReasonReclamationCompleted}},
	"aws-capacity-block-delivered.json":                                 {ignored: [2]string{IgnoreCapacityBlockDelivered, ReasonCapacityStarts}},
	"aws-capacity-block-delivered-eventbridge-keys.json":                {ignored: [2]string{IgnoreCapacityBlockDelivered, ReasonCapacityStarts}},
	"aws-capacity-block-expiration-warning.json":                        {reservation: "cr-0c0a5e0000000bb02"},
	"aws-capacity-block-expiration-warning-eventbridge-keys.json":       {reservation: "cr-0c0a5e0000000bb02"},
	"aws-capacity-reservation-scheduled.json":                           {ignored: [2]string{IgnoreCapacityReservationState, ReasonStateChange}},
	"aws-capacity-reservation-active.json":                              {ignored: [2]string{IgnoreCapacityReservationState, ReasonStateChange}},
	"aws-capacity-reservation-expired.json":                             {ignored: [2]string{IgnoreCapacityReservationState, ReasonStateChange}},
	"aws-state-change-pending.json":                                     {ignored: [2]string{IgnoreStateChange, ReasonInstanceStays}},
	"aws-state-change-shutting-down.json":                               {kind: notice.StateChange, instances: []string{"i-0c0a5e00000000007"}},
	"aws-asg-terminate-lifecycle-action.json":                           {kind: notice.ASGTermination, instances: []string{"i-0c0a5e00000000008"}},
	"aws-asg-launch-lifecycle-action.json":                              {kind: notice.ASGLaunch, instances: []string{"i-0c0a5e00000000009"}},
	"aws-asg-hook-direct.json":                                          {kind: notice.ASGTermination, instances: []string{"i-0c0a5e0000000000a"}},
	"aws-asg-hook-via-sns.json":                                         {kind: notice.ASGTermination, instances: []string{"i-0c0a5e0000000000a"}},
	"aws-asg-test-notification-direct.json":                             {ignored: [2]string{IgnoreASGTestNotification, ReasonTestNotification}},
	"aws-health-ec2-instance-stop-scheduled.json":                       {kind: notice.ScheduledMaintenance, instances: []string{"i-0c0a5e0000000000b"}, deadline: "2026-10-12T02:00:00Z"},
	"aws-health-ec2-instance-stop-closed.json":                          {kind: notice.ScheduledMaintenance, instances: []string{"i-0c0a5e0000000000b"}, deadline: "2026-10-12T02:00:00Z", released: true},
	"aws-health-ec2-issue.json":                                         {ignored: [2]string{IgnoreHealth, ReasonInformational}},
	"aws-health-ec2-account-notification.json":                          {ignored: [2]string{IgnoreHealth, ReasonInformational}},
	"aws-health-other-service.json":                                     {ignored: [2]string{IgnoreHealth, ReasonOtherService}},
	"aws-health-ec2-network-maintenance.json":                           {ignored: [2]string{IgnoreHealth, ReasonInstanceStays}},

	"nth-spot-itn.json":                                  {kind: notice.SpotInterruption, instances: []string{"i-0c0a5e0000000000c"}, deadline: "1970-01-01T00:02:00Z"},
	"nth-rebalance.json":                                 {kind: notice.Rebalance, instances: []string{"i-0c0a5e0000000000c"}},
	"nth-asg-terminate.json":                             {kind: notice.ASGTermination, instances: []string{"i-0c0a5e0000000000d"}},
	"nth-asg-launch.json":                                {kind: notice.ASGLaunch, instances: []string{"i-0c0a5e0000000000e"}},
	"nth-asg-test-notification-eventbridge.json":         {ignored: [2]string{IgnoreASGTestNotification, ReasonTestNotification}},
	"nth-asg-hook-direct.json":                           {kind: notice.ASGTermination, instances: []string{"i-0c0a5e0000000000f"}, noAccount: true},
	"nth-asg-test-notification-direct.json":              {ignored: [2]string{IgnoreASGTestNotification, ReasonTestNotification}, noAccount: true},
	"nth-state-change-pending.json":                      {ignored: [2]string{IgnoreStateChange, ReasonInstanceStays}},
	"nth-health-dedicated-host-network-maintenance.json": {ignored: [2]string{IgnoreHealth, ReasonInstanceStays}},
	"nth-health-retirement.json":                         {kind: notice.ScheduledMaintenance, instances: []string{"i-0c0a5e12"}, deadline: "2016-06-05T15:10:09Z"},

	"karpenter-spot-interruption.json":                 {kind: notice.SpotInterruption, instances: []string{"i-0c0a5e00000000013"}, deadline: "2026-10-05T10:02:00.123456789Z"},
	"karpenter-rebalance.json":                         {kind: notice.Rebalance, instances: []string{"i-0c0a5e00000000014"}},
	"karpenter-capacity-reservation-interruption.json": {kind: notice.CapacityReservationInterruption, instances: []string{"i-0c0a5e00000000015"}, deadline: "2026-10-05T10:02:00Z"},
	"karpenter-state-change-stopping.json":             {kind: notice.StateChange, instances: []string{"i-0c0a5e00000000016"}},
	// Karpenter's tests use a state EC2 does not have; Lifeboat refuses it, naming the field.
	"karpenter-state-change-creating.json": {wantErr: `detail.state "creating" is not an EC2 instance state`},
	// Karpenter's Health messages carry no event ARN, code or times: cordoned, not drained.
	"karpenter-health-scheduled-change.json": {kind: notice.ScheduledMaintenance, instances: []string{"i-0c0a5e00000000018"}, cordonOnly: true},
}

func corpusBodies(t testing.TB) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata", "corpus", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// Every documented shape parses into the right notice or the right ignore reason, from the
// queue's own account; and every file of the corpus has an expectation.
func TestCorpus(t *testing.T) {
	bodies := corpusBodies(t)
	for name := range bodies {
		if _, ok := corpus[name]; !ok {
			t.Errorf("testdata/corpus/%s has no expectation", name)
		}
	}
	p := Parser{QueueAccount: corpusAccount}
	for name, want := range corpus {
		t.Run(name, func(t *testing.T) {
			body, ok := bodies[name]
			if !ok {
				t.Fatal("no such file")
			}
			r, err := p.Parse(body, received)
			if want.noAccount {
				if !errors.Is(err, ErrForeignAccount) {
					t.Fatalf("with the queue's account known: %+v %v, want refused", r, err)
				}
				r, err = Parse(body, received)
			}
			if want.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), want.wantErr) {
					t.Fatalf("error %v, want %q", err, want.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkCorpusResult(t, r, want)
		})
	}
}

func checkCorpusResult(t *testing.T, r Result, want corpusCase) {
	t.Helper()
	switch {
	case want.ignored != [2]string{}:
		if !r.Ignore || [2]string{r.IgnoredKind, r.IgnoredReason} != want.ignored || r.Reason == "" {
			t.Errorf("got %+v, want ignored as %v", r, want.ignored)
		}
		return
	case want.reservation != "":
		if r.Ignore || len(r.Reservations) != 1 || r.Reservations[0].ID != want.reservation {
			t.Errorf("got %+v, want reservation %s", r, want.reservation)
		}
		return
	}
	if r.Ignore || len(r.Notices) != len(want.instances) {
		t.Fatalf("got %+v, want notices for %v", r, want.instances)
	}
	for _, n := range r.Notices {
		if n.Kind != want.kind || !slices.Contains(want.instances, n.InstanceID) || n.CordonOnly != "" != want.cordonOnly || n.Released != want.released {
			t.Errorf("notice %+v, want kind %s for %v (cordon only %v, released %v)", n, want.kind, want.instances, want.cordonOnly, want.released)
		}
		if want.deadline != "" && !n.Deadline.Equal(at(want.deadline)) {
			t.Errorf("deadline %v, want %s", n.Deadline, want.deadline)
		}
	}
}
