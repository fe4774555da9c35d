// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/permissions"
	"lifeboat.dev/lifeboat/internal/source/imds"
)

// DefaultTimeout bounds each network check.
const DefaultTimeout = 15 * time.Second

// Env is what the checks talk to.
type Env struct {
	// Kube is the Kubernetes client; when nil, KubeErr says why there is none and the
	// Kubernetes checks report it.
	Kube    kubernetes.Interface
	KubeErr error
	// IMDS reads instance metadata (agent mode).
	IMDS imds.Getter
	// AWS are the clients for the controller, and for the agent when it completes lifecycle
	// hooks (ENABLE_ASG_LIFECYCLE_DRAINING with ASG_LIFECYCLE_HOOK_NAME); when AWSErr is set
	// they could not be configured.
	AWS    AWS
	AWSErr error
	// Timeout bounds each network check (default DefaultTimeout).
	Timeout time.Duration
}

// Run runs every check mode needs under cfg and returns their rows in a stable order:
// Kubernetes, then the mode's notice source and AWS, then identity settings.
func Run(ctx context.Context, mode config.Mode, cfg *config.Config, env Env) []Row {
	r := &run{ctx: ctx, mode: mode, cfg: cfg, env: env, timeout: env.Timeout}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	kubeOK := r.kubernetes()
	switch mode {
	case config.ModeAgent:
		r.agent(kubeOK)
	case config.ModeController:
		r.controller()
		r.rows = append(r.rows, CheckIdentity(cfg)...)
	}
	return r.rows
}

// run is one preflight run: what it checks against, and the rows found so far.
type run struct {
	ctx     context.Context
	mode    config.Mode
	cfg     *config.Config
	env     Env
	timeout time.Duration
	rows    []Row
}

// bounded runs one check under the run's timeout.
func (r *run) bounded(check func(ctx context.Context)) {
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	check(ctx)
}

// add runs one check that gives one row, under the run's timeout.
func (r *run) add(check func(ctx context.Context) Row) {
	r.bounded(func(ctx context.Context) { r.rows = append(r.rows, check(ctx)) })
}

// addAll runs one check that gives several rows, under the run's timeout.
func (r *run) addAll(check func(ctx context.Context) []Row) {
	r.bounded(func(ctx context.Context) { r.rows = append(r.rows, check(ctx)...) })
}

// kubernetes checks the API server and, when it answers, the mode's permissions; it reports
// whether the API server answered, which the checks of Kubernetes objects need.
func (r *run) kubernetes() (kubeOK bool) {
	env := r.env
	if env.Kube == nil {
		detail := "no client"
		if env.KubeErr != nil {
			detail = env.KubeErr.Error()
		}
		r.rows = append(r.rows, Row{Check: "kubernetes api", Status: StatusFail, Detail: detail,
			Fix: "set KUBECONFIG (or --kubeconfig), or run in a pod with a service account"})
		return false
	}
	r.add(func(ctx context.Context) Row {
		row := CheckAPIServer(ctx, env.Kube)
		kubeOK = row.Status == StatusOK
		return row
	})
	if kubeOK {
		r.addAll(func(ctx context.Context) []Row {
			return CheckPermissions(ctx, env.Kube, permissions.Permissions(r.mode, r.cfg), r.cfg)
		})
	}
	return kubeOK
}

// agent checks instance metadata, the node, and, when the agent completes lifecycle hooks,
// Auto Scaling.
func (r *run) agent(kubeOK bool) {
	env, cfg := r.env, r.cfg
	instanceID := ""
	if env.IMDS != nil {
		r.add(func(ctx context.Context) Row {
			var row Row
			row, instanceID = CheckIMDS(ctx, env.IMDS, cfg.MetadataURL)
			return row
		})
	}
	if kubeOK {
		r.add(func(ctx context.Context) Row { return CheckNode(ctx, env.Kube, cfg.NodeName, instanceID) })
		r.add(func(ctx context.Context) Row { return CheckNodeRestriction(ctx, env.Kube, cfg.NodeName) })
	}
	if !cfg.EnableASGLifecycleDraining || cfg.ASGLifecycleHookName == "" {
		return
	}
	if env.AWSErr != nil {
		r.rows = append(r.rows, Row{Check: "aws configuration", Status: StatusFail, Detail: env.AWSErr.Error(), Fix: reachFix})
		return
	}
	if as := env.AWS.AutoScaling; as != nil {
		if instanceID != "" {
			r.add(func(ctx context.Context) Row { return CheckInstanceGroup(ctx, as, instanceID) })
		}
		r.add(func(ctx context.Context) Row { return CheckAutoScaling(ctx, as) })
		r.add(func(ctx context.Context) Row { return CheckLifecycleHooks(ctx, as) })
	}
}

// controller checks the queue and the AWS calls the controller's settings make.
func (r *run) controller() {
	env, cfg := r.env, r.cfg
	if env.AWSErr != nil {
		r.rows = append(r.rows, Row{Check: "aws configuration", Status: StatusFail, Detail: env.AWSErr.Error(), Fix: reachFix})
		return
	}
	ec2, as := env.AWS.EC2, env.AWS.AutoScaling
	r.addAll(func(ctx context.Context) []Row { return CheckQueue(ctx, env.AWS.SQS, cfg.QueueURL) })
	if env.AWS.Setup != nil {
		r.addAll(func(ctx context.Context) []Row { return CheckSetup(ctx, env.AWS.Setup, cfg.QueueURL) })
	}
	// The settings that make ownership look instances up in EC2.
	if cfg.CheckTagBeforeDraining || cfg.ClusterName != "" || !cfg.UseProviderID {
		r.add(func(ctx context.Context) Row { return CheckEC2(ctx, ec2) })
	} else {
		r.add(func(ctx context.Context) Row { return CheckCapacityBlockLookup(ctx, ec2) })
	}
	r.add(func(ctx context.Context) Row { return CheckCapacityReservations(ctx, ec2) })
	if cfg.EnableInstanceStatusDraining {
		r.add(func(ctx context.Context) Row { return CheckInstanceStatus(ctx, ec2) })
	}
	if cfg.SetImpairedInstanceUnhealthy || cfg.EnableNodeRepair && cfg.NodeRepairAction == config.RepairMarkUnhealthy {
		r.add(func(ctx context.Context) Row { return CheckSetInstanceHealth(ctx, as) })
	}
	r.add(func(ctx context.Context) Row { return CheckAutoScaling(ctx, as) })
	r.add(func(ctx context.Context) Row { return CheckGroupLookup(ctx, as) })
	r.add(func(ctx context.Context) Row { return CheckLifecycleHooks(ctx, as) })
	if cfg.AbandonOnIncompleteDrain {
		r.addAll(func(ctx context.Context) []Row { return CheckRetention(ctx, as) })
	}
	if cfg.WaitsForTargets(r.mode) && env.AWS.LoadBalancing != nil {
		r.add(func(ctx context.Context) Row { return CheckTargetGroups(ctx, env.AWS.LoadBalancing) })
	}
}
