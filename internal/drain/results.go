// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// PodOutcome is what happened to one selected pod.
type PodOutcome struct {
	Pod       types.NamespacedName
	UID       types.UID
	Tier      Tier
	Unmanaged bool
	Attempts  int       // eviction requests sent
	EvictedAt time.Time // the eviction (or forced deletion) was accepted
	GoneAt    time.Time // its deletion was observed
	Forced    bool      // deleted past a PodDisruptionBudget near the deadline
	Error     string    // why it is still on the node, if it is
	// BlockedBy is what last refused its eviction, if a disruption budget did.
	BlockedBy *Blocker
	// BudgetRefusals counts the requests a disruption budget refused (the eviction API's 429
	// naming one, or its 500 when several select the pod); the other refused requests were
	// throttled or met a transient error.
	BudgetRefusals int
	// IP is the pod's own IP as it was listed (empty for host-network pods, which share the
	// node's); load balancers with IP targets hold it until they deregister it.
	IP string
	// Claims are the PersistentVolumeClaims its volumes use ("namespace/name").
	Claims []string
}

// outcomeOf starts a selected pod's outcome from what the list showed of it.
func outcomeOf(c Candidate) PodOutcome {
	out := PodOutcome{Pod: types.NamespacedName{Namespace: c.Pod.Namespace, Name: c.Pod.Name}, UID: c.Pod.UID, Tier: c.Tier, Unmanaged: c.Unmanaged}
	if !c.Pod.Spec.HostNetwork {
		out.IP = c.Pod.Status.PodIP
	}
	for _, v := range c.Pod.Spec.Volumes {
		switch {
		case v.ClaimName != "":
			out.Claims = append(out.Claims, c.Pod.Namespace+"/"+v.ClaimName)
		case v.Ephemeral: // a generic ephemeral volume's claim is named after the pod
			out.Claims = append(out.Claims, c.Pod.Namespace+"/"+c.Pod.Name+"-"+v.Name)
		}
	}
	return out
}

// Result reports a drain: every selected pod's outcome, every skipped pod with its reason,
// and timings.
type Result struct {
	Node     string
	DryRun   bool
	Started  time.Time
	Listed   time.Time
	Finished time.Time
	Pods     []PodOutcome
	Skipped  []Skipped
}

// Held lists the pods left on the node that their owners marked not to disrupt, under a
// notice that is no reclaim: they keep serving, and end with the instance unless a reclaim's
// drain evicts them.
func (r *Result) Held() []Skipped {
	var out []Skipped
	for _, s := range r.Skipped {
		if s.Reason == ReasonDoNotEvict {
			out = append(out, s)
		}
	}
	return out
}

// Remaining lists selected pods that are not gone.
func (r *Result) Remaining() []PodOutcome {
	var out []PodOutcome
	for _, p := range r.Pods {
		if p.GoneAt.IsZero() {
			out = append(out, p)
		}
	}
	return out
}
