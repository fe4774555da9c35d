// SPDX-License-Identifier: Apache-2.0

// Package controllerdaemon builds the controller, the driver of controller mode, with its AWS
// clients. It is apart from package daemon so that the agent's binary (cmd/lifeboat-agent)
// links neither the controller nor the SDK clients only it uses.
package controllerdaemon

import (
	"context"
	"errors"
	"fmt"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/daemon"
)

// Build makes the controller the process's driver (a daemon.Build).
func Build(ctx context.Context, p daemon.Parts) (daemon.Driver, error) {
	cfg, logger := p.Config, p.Logger
	awsCfg, err := cloud.LoadAWSConfig(ctx, cfg.AWSRegion, cfg.AWSEndpoint)
	if err != nil {
		return daemon.Driver{}, fmt.Errorf("cannot start the controller: %w", err)
	}
	ctl := controller.New(controller.Options{Config: cfg, Client: p.Clients.Main, Logger: logger, Metrics: p.Metrics, Handler: p.Handler,
		LeaseClient: p.Clients.Lease, // outside the budget: renewals never wait behind evictions
		Queue:       awssqs.NewFromConfig(awsCfg), EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg),
		EKS: controlleronly.NewAWSEKS(awsCfg), Setup: controlleronly.NewAWSSetup(awsCfg)})
	return daemon.Driver{Ready: ctl.Healthy, Run: func(ctx context.Context) error {
		for {
			err := ctl.RunWithLeaderElection(ctx)
			if errors.Is(err, controller.ErrLeaseLost) && ctx.Err() == nil {
				// Its work has stopped. Standing by again, it takes the Lease back at its first
				// read if the Lease still names it (an API server outage), or waits.
				logger.Warn("lost the Lease; standing by again", "err", err)
				continue
			}
			if err != nil {
				return fmt.Errorf("controller stopped: %w", err)
			}
			logger.Info("controller stopped; unfinished messages come back to the next leader")
			return nil
		}
	}}, nil
}
