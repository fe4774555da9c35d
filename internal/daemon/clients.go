// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/kube/pacing"
	"lifeboat.dev/lifeboat/internal/metrics"
)

// The Lease's client is outside the shared budget: a renewal every retry period must never
// wait behind evictions, and never needs more than this.
const (
	leaseQPS   = 10
	leaseBurst = 20
)

// Clients are the Kubernetes clients of the agent and the controller. All but the Lease's
// share one pacing budget, each in its own lane.
type Clients struct {
	Main   kubernetes.Interface // records, drains, hand-back reads: the ordinary lane
	Cordon kubernetes.Interface // cordons: the urgent lane
	Events kubernetes.Interface // Kubernetes Events: the background lane
	Lease  kubernetes.Interface // leader election, on its own small fixed rate
	Budget *pacing.Budget
}

// Pacing is the shared budget's options: the bound on requests in flight follows the API
// server; KUBE_API_QPS, when not 0, also caps the rate (with KUBE_API_BURST).
func Pacing(c *config.Config, observer pacing.Observer) pacing.Options {
	return pacing.Options{Rate: c.KubeAPIQPS, Burst: c.KubeAPIBurst, Observer: observer}
}

// KubeClients builds the clients from one base configuration (kube.RESTConfig in the binary,
// a sandbox user's in benchmarks), each counted in m under its name.
func KubeClients(base *rest.Config, c *config.Config, m *metrics.Metrics) (*Clients, error) {
	return KubeClientsPaced(base, Pacing(c, m), m)
}

// KubeClientsPaced is KubeClients with the budget's options given (benchmarks try other
// bounds with it; the binaries use KubeClients).
func KubeClientsPaced(base *rest.Config, pace pacing.Options, m *metrics.Metrics) (*Clients, error) {
	budget := pacing.New(pace)
	lanes := make([]string, len(pacing.Lanes))
	for i, l := range pacing.Lanes {
		lanes[i] = l.String()
	}
	laneOf := func(name string) pacing.Lane { return pacing.Lanes[slices.Index(lanes, name)] }
	m.WatchBudget(metrics.BudgetReader{Limit: budget.Limit, Lanes: lanes,
		Waiting:  func(lane string) int { return budget.Waiting(laneOf(lane)) },
		InFlight: func(lane string) int { return budget.InFlight(laneOf(lane)) },
	})
	paced := func(name string, lane pacing.Lane) (kubernetes.Interface, error) {
		rc := kube.Instrumented(withProtobuf(base), name, kube.Observers{m, budget})
		budget.Configure(rc, lane)
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client %s: %w", name, err)
		}
		return cs, nil
	}
	out := &Clients{Budget: budget}
	var err error
	if out.Main, err = paced("main", pacing.Ordinary); err != nil {
		return nil, err
	}
	if out.Cordon, err = paced("cordon", pacing.Urgent); err != nil {
		return nil, err
	}
	if out.Events, err = paced("events", pacing.Background); err != nil {
		return nil, err
	}
	lease := kube.Instrumented(withProtobuf(base), "lease", m)
	lease.RateLimiter, lease.QPS, lease.Burst = nil, leaseQPS, leaseBurst
	if out.Lease, err = kubernetes.NewForConfig(lease); err != nil {
		return nil, fmt.Errorf("kubernetes client lease: %w", err)
	}
	return out, nil
}

// withProtobuf asks for Kubernetes' protobuf encoding, as the cluster's own components do. The
// API server encodes each watch event once per encoding its watchers use: a JSON pod watch
// across the cluster makes it encode every pod change a second time, in JSON, for Lifeboat
// alone. Every type these clients read and write (core, policy, coordination, events) has a
// protobuf form; the answers of non-resource paths still come as JSON.
func withProtobuf(base *rest.Config) *rest.Config {
	rc := rest.CopyConfig(base)
	rc.ContentType = runtime.ContentTypeProtobuf
	rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return rc
}
