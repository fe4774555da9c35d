// SPDX-License-Identifier: Apache-2.0

package notice

import (
	"slices"
	"strings"
)

// Kind is what AWS announced.
type Kind string

// The kinds. A kind is added here, with its row in the table below; every part of Lifeboat
// reads the row (RulesOf) rather than comparing kinds.
const (
	SpotInterruption Kind = "spot-interruption"
	// CapacityReservationInterruption is EC2 reclaiming an instance of a capacity reservation
	// (capacity blocks, interruptible reservations): two minutes' warning, as for Spot.
	CapacityReservationInterruption Kind = "capacity-reservation-interruption"
	ScheduledMaintenance            Kind = "scheduled-maintenance"
	Rebalance                       Kind = "rebalance-recommendation"
	ASGTermination                  Kind = "asg-termination"
	StateChange                     Kind = "state-change"
	ASGLaunch                       Kind = "asg-launch"
	// CapacityBlockExpiration is a Capacity Block (reserved GPU capacity) about to end: EC2
	// begins terminating its instances ten minutes after the warning.
	CapacityBlockExpiration Kind = "capacity-block-expiration"
	// InstanceImpaired is an instance whose EC2 status checks have failed for longer than
	// INSTANCE_IMPAIRED_THRESHOLD: it is drained so that its pods run elsewhere.
	InstanceImpaired Kind = "instance-impaired"
	// NodeRepair is a node whose agent-set condition (node-problem-detector, the EKS node
	// monitoring agent) has held an unhealthy status for longer than its repair policy's wait:
	// it is drained and its instance handed to its group for replacement.
	NodeRepair Kind = "node-repair"
)

// NTH's taint keys, one per kind of interruption, so that tolerations written for NTH keep
// working.
const (
	TaintSpotInterruption     = "aws-node-termination-handler/spot-itn"
	TaintScheduledMaintenance = "aws-node-termination-handler/scheduled-maintenance"
	TaintASGLifecycle         = "aws-node-termination-handler/asg-lifecycle-termination"
	TaintRebalance            = "aws-node-termination-handler/rebalance-recommendation"
)

// Hook is the Auto Scaling lifecycle action a kind's notices answer.
type Hook int

const (
	// HookNone: the notice answers no lifecycle action.
	HookNone Hook = iota
	// HookTermination: a termination hook holds the instance. Its timeout bounds the deadline,
	// it is kept alive while the drain runs, completed once the node is drained, and may be
	// abandoned to retention.
	HookTermination
	// HookLaunch: a launch hook holds the instance until its node is Ready. It is answered at
	// intake and never recorded on a Node.
	HookLaunch
)

// Ending is what is done for a notice once its node is drained, before the notice is
// recorded finished.
type Ending int

const (
	// EndsDrained: nothing more; the node stays cordoned until the instance goes.
	EndsDrained Ending = iota
	// EndsHookCompleted: its termination hook is completed (CONTINUE).
	EndsHookCompleted
	// EndsMarkedUnhealthy: the instance is marked unhealthy in its Auto Scaling group when
	// MARK_UNHEALTHY is set, so that the group replaces it.
	EndsMarkedUnhealthy
	// EndsRepaired: the instance is given NODE_REPAIR_ACTION.
	EndsRepaired
)

// Rules are everything Lifeboat's parts decide by a notice's kind. Every part reads them from
// the one table (see RulesOf), so a kind is added in one place.
type Rules struct {
	// Short starts the kind's notice ids (see ID).
	Short string
	// Sources are the sources whose notices may be of this kind.
	Sources []Source
	// Drains says the node is drained, not only cordoned (plans may still say otherwise: see
	// the settings that turn a kind's drain off).
	Drains bool
	// DrainOptIn says the kind drains only where a setting asks for it: from instance
	// metadata with ENABLE_REBALANCE_DRAINING, and from the queue unless CORDON_ONLY, as NTH's
	// queue mode does.
	DrainOptIn bool
	// Reclaims says the instance is taken away at the notice's deadline whatever happens (a
	// Spot, capacity-reservation or Capacity Block warning, a termination hook at its expiry,
	// a scheduled event at its start). A rebalance recommendation, a state change or an
	// impaired instance is no reclaim: its deadline is a budget Lifeboat sets.
	Reclaims bool
	// GoesAtDeadline says the instance goes at the deadline and nothing Lifeboat does extends
	// it (no heartbeat, no retention).
	GoesAtDeadline bool
	// Scheduled says AWS announces a start ahead of time: the drain begins
	// NODE_TERMINATION_GRACE_PERIOD before it; a later copy from the queue or from
	// DescribeInstanceStatus may restate the start, which moves it in the same episode; a boot
	// of the instance ends the notice; and after a reboot code (RebootCodes) the node is given
	// back.
	Scheduled bool
	// Hook is the lifecycle action the kind's notices answer.
	Hook Hook
	// Ends is what is done once the node is drained.
	Ends Ending
	// CheckedOn, when set, is the ownership path a queue notice of this kind is checked on
	// instead of the queue's (a Capacity Block's warning is held against EC2's own list).
	CheckedOn string
	// TaintKey is the NTH taint key put on the node with TAINT_NODE ("" for none).
	TaintKey string
	// EventReason is the reason of the Event that reports the notice.
	EventReason string
	// Title names the kind in Events and logs ("Spot interruption").
	Title string
	// NTHKind is NTH's .Kind for webhook templates written for NTH (WEBHOOK_NTH_KINDS); ""
	// when NTH has none and the template sees Lifeboat's kind.
	NTHKind string
	// About is one line for the docs: what AWS announces.
	About string
}

// kinds is the table.
var kinds = map[Kind]Rules{
	SpotInterruption: {Short: "spot", Sources: []Source{SourceIMDS, SourceQueue}, Drains: true, Reclaims: true, GoesAtDeadline: true,
		TaintKey: TaintSpotInterruption, EventReason: "SpotInterruption", Title: "Spot interruption", NTHKind: "SPOT_ITN",
		About: "EC2 reclaims a Spot instance in two minutes"},
	// NTH does not read capacity reservation warnings; they are the same two-minute reclaim as
	// a Spot warning, so Spot tolerations and NTH templates apply.
	CapacityReservationInterruption: {Short: "capres", Sources: []Source{SourceQueue}, Drains: true, Reclaims: true, GoesAtDeadline: true,
		TaintKey: TaintSpotInterruption, EventReason: "CapacityReservationInterruption", Title: "Capacity reservation interruption", NTHKind: "SPOT_ITN",
		About: "EC2 reclaims an instance of an interruptible capacity reservation"},
	// A Capacity Block's end reclaims its instances as a Spot interruption does.
	CapacityBlockExpiration: {Short: "capblock", Sources: []Source{SourceQueue}, Drains: true, Reclaims: true, GoesAtDeadline: true,
		CheckedOn: "capacity_block",
		TaintKey:  TaintSpotInterruption, EventReason: "CapacityBlockExpiration", Title: "Capacity Block expiration",
		About: "a Capacity Block ends and EC2 terminates its instances"},
	ScheduledMaintenance: {Short: "sched", Sources: []Source{SourceIMDS, SourceQueue, SourceEC2Status}, Drains: true, Reclaims: true, Scheduled: true,
		TaintKey: TaintScheduledMaintenance, EventReason: "ScheduledEvent", Title: "Scheduled maintenance", NTHKind: "SCHEDULED_EVENT",
		About: "EC2 or AWS Health schedules a reboot, stop or retirement of the instance"},
	// A failing instance is taken out of service as for maintenance.
	InstanceImpaired: {Short: "impaired", Sources: []Source{SourceEC2Status}, Drains: true, Ends: EndsMarkedUnhealthy,
		TaintKey: TaintScheduledMaintenance, EventReason: "InstanceImpaired", Title: "Failing EC2 status checks",
		About: "the instance's EC2 status checks have failed for longer than INSTANCE_IMPAIRED_THRESHOLD"},
	// A node its agent reports unhealthy is taken out of service as a failing instance is.
	NodeRepair: {Short: "repair", Sources: []Source{SourceNodeCondition}, Drains: true, Ends: EndsRepaired,
		TaintKey: TaintScheduledMaintenance, EventReason: "NodeRepair", Title: "Node repair",
		About: "a condition a node agent sets has held an unhealthy status for longer than its policy's wait (NODE_REPAIR_POLICIES, NODE_REPAIR_CONDITIONS)"},
	Rebalance: {Short: "rebalance", Sources: []Source{SourceIMDS, SourceQueue}, DrainOptIn: true,
		TaintKey: TaintRebalance, EventReason: "RebalanceRecommendation", Title: "Rebalance recommendation", NTHKind: "REBALANCE_RECOMMENDATION",
		About: "EC2 says a Spot instance is at higher risk of interruption"},
	ASGTermination: {Short: "asg-term", Sources: []Source{SourceIMDS, SourceQueue}, Drains: true, Reclaims: true,
		Hook: HookTermination, Ends: EndsHookCompleted,
		TaintKey: TaintASGLifecycle, EventReason: "ASGLifecycle", Title: "Auto Scaling termination", NTHKind: "ASG_LIFECYCLE",
		About: "an Auto Scaling group terminates the instance and waits on a lifecycle hook"},
	// A state change means the instance is stopping or terminating, like an Auto Scaling
	// termination.
	StateChange: {Short: "state", Sources: []Source{SourceQueue}, Drains: true,
		TaintKey: TaintASGLifecycle, EventReason: "StateChange", Title: "Instance state change", NTHKind: "STATE_CHANGE",
		About: "the instance is stopping or terminating"},
	ASGLaunch: {Short: "asg-launch", Sources: []Source{SourceQueue}, Hook: HookLaunch,
		EventReason: "ASGLaunch", Title: "Auto Scaling launch", NTHKind: "ASG_LAUNCH_LIFECYCLE",
		About: "an Auto Scaling group launches the instance and waits on a lifecycle hook until its node is Ready"},
}

// RulesOf is the kind's row of the table; ok is false for a kind this binary does not know
// (a newer release's, read from a record).
func RulesOf(k Kind) (r Rules, ok bool) {
	r, ok = kinds[k]
	return r, ok
}

// Kinds are every kind in the table, sorted.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Known reports whether k is a kind of the table.
func (k Kind) Known() bool {
	_, ok := kinds[k]
	return ok
}

// Drains reports whether a notice of kind k drains its node (Rules.Drains).
func (k Kind) Drains() bool { return kinds[k].Drains }

// Reclaims reports whether the instance is taken away at the notice's deadline (Rules.Reclaims).
func (k Kind) Reclaims() bool { return kinds[k].Reclaims }

// GoesAtDeadline reports whether the instance goes at the deadline whatever Lifeboat does
// (Rules.GoesAtDeadline).
func (k Kind) GoesAtDeadline() bool { return kinds[k].GoesAtDeadline }

// ReclaimedOutright reports a reclaim that no lifecycle hook answers: the instance goes at
// its deadline even when a hook's action could be abandoned to retention.
func (k Kind) ReclaimedOutright() bool { return k.Reclaims() && kinds[k].Hook != HookTermination }

// Hook is the lifecycle action the kind's notices answer (Rules.Hook).
func (k Kind) Hook() Hook { return kinds[k].Hook }

// Ends is what is done for the kind's notice once its node is drained (Rules.Ends).
func (k Kind) Ends() Ending { return kinds[k].Ends }

// Scheduled reports a kind whose start AWS announces ahead (Rules.Scheduled).
func (k Kind) Scheduled() bool { return kinds[k].Scheduled }

// Recorded reports whether the kind's notices are recorded on a Node: a launch hook's is
// answered at intake.
func (k Kind) Recorded() bool { return k.Known() && kinds[k].Hook != HookLaunch }

// From reports whether a notice of kind k may come from source s (Rules.Sources).
func (k Kind) From(s Source) bool { return slices.Contains(kinds[k].Sources, s) }

// KindOfID is the kind whose short name starts the notice id (see ID); ok is false for an
// id no kind of the table starts.
func KindOfID(id string) (k Kind, ok bool) {
	for kind, r := range kinds {
		if strings.HasPrefix(id, r.Short+"-") {
			return kind, true
		}
	}
	return "", false
}
