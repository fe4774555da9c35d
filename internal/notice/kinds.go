// SPDX-License-Identifier: Apache-2.0

package notice

import "slices"

// NTH's taint keys, one per kind of interruption, so that tolerations written for NTH keep
// working.
const (
	TaintSpotInterruption     = "aws-node-termination-handler/spot-itn"
	TaintScheduledMaintenance = "aws-node-termination-handler/scheduled-maintenance"
	TaintASGLifecycle         = "aws-node-termination-handler/asg-lifecycle-termination"
	TaintRebalance            = "aws-node-termination-handler/rebalance-recommendation"
)

// Rules are everything Lifeboat's parts decide by a notice's kind. Every part reads them from
// the one table (see RulesOf), so a kind is added in one place.
type Rules struct {
	// Short starts the kind's notice ids (see ID).
	Short string
	// Drains says the node is drained, not only cordoned (plans may still say otherwise: see
	// the settings that turn a kind's drain off).
	Drains bool
	// Reclaims says the instance is taken away at the notice's deadline whatever happens (a
	// Spot, capacity-reservation or Capacity Block warning, a termination hook at its expiry,
	// a scheduled event at its start). A rebalance recommendation, a state change or an
	// impaired instance is no reclaim: its deadline is a budget Lifeboat sets.
	Reclaims bool
	// GoesAtDeadline says the instance goes at the deadline and nothing Lifeboat does extends
	// it (no heartbeat, no retention).
	GoesAtDeadline bool
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
	SpotInterruption: {Short: "spot", Drains: true, Reclaims: true, GoesAtDeadline: true,
		TaintKey: TaintSpotInterruption, EventReason: "SpotInterruption", Title: "Spot interruption", NTHKind: "SPOT_ITN",
		About: "EC2 reclaims a Spot instance in two minutes"},
	// NTH does not read capacity reservation warnings; they are the same two-minute reclaim as
	// a Spot warning, so Spot tolerations and NTH templates apply.
	CapacityReservationInterruption: {Short: "capres", Drains: true, Reclaims: true, GoesAtDeadline: true,
		TaintKey: TaintSpotInterruption, EventReason: "CapacityReservationInterruption", Title: "Capacity reservation interruption", NTHKind: "SPOT_ITN",
		About: "EC2 reclaims an instance of an interruptible capacity reservation"},
	// A Capacity Block's end reclaims its instances as a Spot interruption does.
	CapacityBlockExpiration: {Short: "capblock", Drains: true, Reclaims: true, GoesAtDeadline: true,
		TaintKey: TaintSpotInterruption, EventReason: "CapacityBlockExpiration", Title: "Capacity Block expiration",
		About: "a Capacity Block ends and EC2 terminates its instances"},
	ScheduledMaintenance: {Short: "sched", Drains: true, Reclaims: true,
		TaintKey: TaintScheduledMaintenance, EventReason: "ScheduledEvent", Title: "Scheduled maintenance", NTHKind: "SCHEDULED_EVENT",
		About: "EC2 or AWS Health schedules a reboot, stop or retirement of the instance"},
	// A failing instance is taken out of service as for maintenance.
	InstanceImpaired: {Short: "impaired", Drains: true,
		TaintKey: TaintScheduledMaintenance, EventReason: "InstanceImpaired", Title: "Failing EC2 status checks",
		About: "the instance's EC2 status checks have failed for longer than INSTANCE_IMPAIRED_THRESHOLD"},
	// A node its agent reports unhealthy is taken out of service as a failing instance is.
	NodeRepair: {Short: "repair", Drains: true,
		TaintKey: TaintScheduledMaintenance, EventReason: "NodeRepair", Title: "Node repair",
		About: "a condition a node agent sets has held an unhealthy status for longer than its NODE_REPAIR_CONDITIONS duration"},
	Rebalance: {Short: "rebalance",
		TaintKey: TaintRebalance, EventReason: "RebalanceRecommendation", Title: "Rebalance recommendation", NTHKind: "REBALANCE_RECOMMENDATION",
		About: "EC2 says a Spot instance is at higher risk of interruption"},
	ASGTermination: {Short: "asg-term", Drains: true, Reclaims: true,
		TaintKey: TaintASGLifecycle, EventReason: "ASGLifecycle", Title: "Auto Scaling termination", NTHKind: "ASG_LIFECYCLE",
		About: "an Auto Scaling group terminates the instance and waits on a lifecycle hook"},
	// A state change means the instance is stopping or terminating, like an Auto Scaling
	// termination.
	StateChange: {Short: "state", Drains: true,
		TaintKey: TaintASGLifecycle, EventReason: "StateChange", Title: "Instance state change", NTHKind: "STATE_CHANGE",
		About: "the instance is stopping or terminating"},
	ASGLaunch: {Short: "asg-launch",
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
func (k Kind) ReclaimedOutright() bool { return k.Reclaims() && k != ASGTermination }
