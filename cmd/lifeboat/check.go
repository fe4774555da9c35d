// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/spf13/cobra"

	"lifeboat.dev/lifeboat/internal/check"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/output"
	"lifeboat.dev/lifeboat/internal/wiring"
)

// checkSettings are the daemon's settings check measures against (the drain's policy and
// grace override); no other setting can stop it.
var checkSettings = []string{"IGNORE_DAEMON_SETS", "DELETE_LOCAL_DATA", "POD_TERMINATION_GRACE_PERIOD"}

func (a *app) checkCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "List the workloads that could not leave a node within a Spot warning; exit 1 when any",
		Long: `Check lists the workloads that could not leave a node within a Spot warning's two minutes
(a PodDisruptionBudget allowing no disruption, a grace period of two minutes or more,
do-not-disrupt pods, single replicas without a budget, emptyDir data kept, pods without a
controller), each with the fix. It looks at every namespace unless -n names one, changes
nothing, and exits 1 when it finds any, so a CI job can run it.

Output formats: table (default), name, json, yaml, jsonpath=TEMPLATE.`,
		Example: `  lifeboat check
  lifeboat check -n payments -o json
  kubectl lifeboat check --context prod -o name`,
		GroupID: groupRead,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := output.Parse(a.output, check.Formats...)
			if err != nil {
				return usageError("%v", err)
			}
			loaded, err := config.LoadOnly(checkSettings, a.lookupEnv)
			if err != nil {
				return usageError("%v", err)
			}
			client, err := a.kube.client()
			if err != nil {
				return usageError("%v", err)
			}
			drain := wiring.Drain(loaded.Config, client, nil)
			findings, err := check.Check(cmd.Context(), client, check.Options{Policy: drain.Policy, PodGracePeriod: drain.PodGracePeriod,
				Namespace: a.kube.namespace()})
			if err != nil {
				return runtimeError(err) // Forbidden included: not a finding, the check could not look
			}
			if err := check.PrintFormat(a.stdout, findings, f); err != nil {
				return runtimeError(err)
			}
			if len(findings) > 0 {
				return exitWith(exitFindings)
			}
			return nil
		},
	}
}
