package preflight

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
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
	timeout := env.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	bounded := func(check func(ctx context.Context)) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		check(ctx)
	}

	var rows []Row
	kubeOK := false
	if env.Kube == nil {
		detail := "no client"
		if env.KubeErr != nil {
			detail = env.KubeErr.Error()
		}
		rows = append(rows, Row{Check: "kubernetes api", Status: StatusFail, Detail: detail,
			Fix: "set KUBECONFIG (or --kubeconfig), or run in a pod with a service account"})
	} else {
		bounded(func(ctx context.Context) {
			row := CheckAPIServer(ctx, env.Kube)
			rows, kubeOK = append(rows, row), row.Status == StatusOK
		})
	}
	if kubeOK {
		bounded(func(ctx context.Context) {
			rows = append(rows, CheckPermissions(ctx, env.Kube, Permissions(mode, cfg))...)
		})
	}

	switch mode {
	case config.ModeAgent:
		instanceID := ""
		if env.IMDS != nil {
			bounded(func(ctx context.Context) {
				var row Row
				row, instanceID = CheckIMDS(ctx, env.IMDS, cfg.MetadataURL)
				rows = append(rows, row)
			})
		}
		if kubeOK {
			bounded(func(ctx context.Context) { rows = append(rows, CheckNode(ctx, env.Kube, cfg.NodeName, instanceID)) })
			bounded(func(ctx context.Context) { rows = append(rows, CheckNodeRestriction(ctx, env.Kube, cfg.NodeName)) })
		}
		if cfg.EnableASGLifecycleDraining && cfg.ASGLifecycleHookName != "" {
			if env.AWSErr != nil {
				rows = append(rows, Row{Check: "aws configuration", Status: StatusFail, Detail: env.AWSErr.Error(), Fix: reachFix})
			} else if env.AWS.AutoScaling != nil {
				if instanceID != "" {
					bounded(func(ctx context.Context) {
						rows = append(rows, CheckInstanceGroup(ctx, env.AWS.AutoScaling, instanceID))
					})
				}
				bounded(func(ctx context.Context) { rows = append(rows, CheckAutoScaling(ctx, env.AWS.AutoScaling)) })
				bounded(func(ctx context.Context) { rows = append(rows, CheckLifecycleHooks(ctx, env.AWS.AutoScaling)) })
			}
		}
	case config.ModeController:
		if env.AWSErr != nil {
			rows = append(rows, Row{Check: "aws configuration", Status: StatusFail, Detail: env.AWSErr.Error(), Fix: reachFix})
		} else {
			bounded(func(ctx context.Context) { rows = append(rows, CheckQueue(ctx, env.AWS.SQS, cfg.QueueURL)...) })
			// The settings that make ownership look instances up in EC2.
			if cfg.CheckTagBeforeDraining || cfg.ClusterName != "" || !cfg.UseProviderID {
				bounded(func(ctx context.Context) { rows = append(rows, CheckEC2(ctx, env.AWS.EC2)) })
			} else {
				rows = append(rows, CheckEC2NotNeeded())
			}
			bounded(func(ctx context.Context) { rows = append(rows, CheckAutoScaling(ctx, env.AWS.AutoScaling)) })
			bounded(func(ctx context.Context) { rows = append(rows, CheckGroupLookup(ctx, env.AWS.AutoScaling)) })
			bounded(func(ctx context.Context) { rows = append(rows, CheckLifecycleHooks(ctx, env.AWS.AutoScaling)) })
			if cfg.AbandonOnIncompleteDrain {
				bounded(func(ctx context.Context) { rows = append(rows, CheckRetention(ctx, env.AWS.AutoScaling)...) })
			}
			if cfg.WaitsForTargets(mode) && env.AWS.LoadBalancing != nil {
				bounded(func(ctx context.Context) { rows = append(rows, CheckTargetGroups(ctx, env.AWS.LoadBalancing)) })
			}
		}
		rows = append(rows, CheckIdentity(cfg)...)
	}
	return rows
}
