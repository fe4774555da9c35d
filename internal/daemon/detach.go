// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/detach"
	"lifeboat.dev/lifeboat/internal/detach/targets"
	"lifeboat.dev/lifeboat/internal/detach/volumes"
	"lifeboat.dev/lifeboat/internal/metrics"
)

// DetachWaits builds the waits between a drained node and the hand-back of its instance that the
// configuration turns on for the mode: volume detachment (WAIT_FOR_VOLUME_DETACHMENT) and
// load-balancer targets (WAIT_FOR_LOAD_BALANCER_TARGETS). The target wait reads the target
// groups once here: without permission it is left out, with one warning now rather than one
// per node later.
func DetachWaits(ctx context.Context, c *config.Config, mode config.Mode, client kubernetes.Interface, m *metrics.Metrics, logger *slog.Logger) []detach.Wait {
	var waits []detach.Wait
	if c.WaitForVolumeDetachment {
		waits = append(waits, volumes.New(ctx, client))
	}
	if !c.WaitsForTargets(mode) {
		return waits
	}
	awsCfg, err := cloud.LoadAWSConfig(ctx, c.AWSRegion, c.AWSEndpoint)
	if err != nil {
		logger.Warn("load-balancer target wait off: no AWS configuration", "err", err)
		return waits
	}
	w := targets.New(cloud.NewAWSLoadBalancing(awsCfg), targets.Options{
		Observe: func(operation string, err error) { m.AWSCall(operation, err, nil) },
		Logger:  logger,
	})
	checkCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	switch err := w.Check(checkCtx); {
	case errors.Is(err, cloud.ErrAccessDenied):
		logger.Warn("load-balancer target wait off: no permission to read target groups; grant elasticloadbalancing:DescribeTargetGroups and "+
			"elasticloadbalancing:DescribeTargetHealth, or set WAIT_FOR_LOAD_BALANCER_TARGETS=false", "err", err)
		return waits
	case err != nil:
		logger.Warn("could not read the load balancers' target groups; the wait will try again when a node needs it", "err", err)
	}
	return append(waits, w)
}
