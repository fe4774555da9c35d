// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/check"
	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/output"
	"lifeboat.dev/lifeboat/internal/wiring"
)

// checkSettings are the daemon's settings check measures against (the drain's policy and
// grace override, whether node repair is on and how it hands instances back, and where AWS
// is); no other setting can stop it.
var checkSettings = []string{"IGNORE_DAEMON_SETS", "DELETE_LOCAL_DATA", "POD_TERMINATION_GRACE_PERIOD",
	"ENABLE_NODE_REPAIR", "NODE_REPAIR_ACTION", "AWS_REGION", "AWS_ENDPOINT"}

// groupsTimeout bounds the groups report: AWS's credentials, then a few Describe calls.
const groupsTimeout = 30 * time.Second

func (a *app) checkCommand() *cobra.Command {
	groups := true
	cmd := &cobra.Command{
		Use:   "check",
		Short: "List the workloads that could not leave a node within a Spot warning, and the nodes' Auto Scaling groups; exit 1 on findings",
		Long: `Check lists the workloads that could not leave a node within a Spot warning's two minutes
(a PodDisruptionBudget allowing no disruption, a grace period of two minutes or more,
do-not-disrupt pods, single replicas without a budget, emptyDir data kept, pods without a
controller), each with the fix. It looks at every namespace unless -n names one.

It then reports the Auto Scaling groups of the cluster's nodes (AWS credentials, AWS_REGION;
autoscaling:DescribeAutoScalingInstances and autoscaling:DescribeAutoScalingGroups) and
whether each group's instance maintenance policy launches a repaired node's replacement
before the instance goes, with the command that makes it do so. A group that does not is a
finding only with ENABLE_NODE_REPAIR=true; otherwise it is advice. When AWS cannot be read,
one line says why and the workload checks stand.

Check changes nothing, and exits 1 when it finds anything, so a CI job can run it.

Output formats: table (default), name, json, yaml, jsonpath=TEMPLATE.`,
		Example: `  lifeboat check
  lifeboat check -n payments -o json --auto-scaling-groups=false
  ENABLE_NODE_REPAIR=true AWS_REGION=eu-west-1 lifeboat check
  kubectl lifeboat check --context prod -o name`,
		GroupID: groupRead,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCheck(cmd.Context(), a, groups)
		},
	}
	cmd.Flags().BoolVar(&groups, "auto-scaling-groups", true, "Also report the nodes' Auto Scaling groups and their instance maintenance policies (AWS credentials, AWS_REGION)")
	return cmd
}

// runCheck runs the workload checks and, with groups, the groups report, prints them and exits 1
// on findings.
func runCheck(ctx context.Context, a *app, groups bool) error {
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
	findings, err := check.Check(ctx, client, check.Options{Policy: drain.Policy, PodGracePeriod: drain.PodGracePeriod,
		Namespace: a.kube.namespace()})
	if err != nil {
		return runtimeError(err) // Forbidden included: not a finding, the check could not look
	}
	var report *check.Groups
	if groups {
		report = checkGroups(ctx, client, loaded.Config)
		if report.NotChecked != "" && f.Name != output.Table {
			fmt.Fprintf(a.stderr, "Auto Scaling groups not checked: %s.\n", report.NotChecked)
		}
	}
	if err := check.PrintWithGroups(a.stdout, findings, report, f); err != nil {
		return runtimeError(err)
	}
	if len(findings) > 0 || report.Findings() > 0 {
		return exitWith(exitFindings)
	}
	return nil
}

// checkGroups reads the groups report. What keeps it from AWS (no region, no credentials, the
// nodes not listed) is said in NotChecked, in one line.
func checkGroups(ctx context.Context, client kubernetes.Interface, cfg *config.Config) *check.Groups {
	ctx, cancel := context.WithTimeout(ctx, groupsTimeout)
	defer cancel()
	notChecked := func(why string) *check.Groups {
		return &check.Groups{Groups: []check.Group{}, NotChecked: strings.Join(strings.Fields(why), " ")}
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return notChecked("cannot list nodes: " + err.Error())
	}
	awsCfg, err := cloud.LoadAWSConfig(ctx, cfg.AWSRegion, cfg.AWSEndpoint)
	switch {
	case err != nil:
		return notChecked("AWS not configured: " + err.Error())
	case awsCfg.Region == "":
		return notChecked("AWS not configured: no region (set AWS_REGION)")
	}
	if awsCfg.Credentials == nil {
		return notChecked("AWS not configured: no credentials")
	}
	if _, err := awsCfg.Credentials.Retrieve(ctx); err != nil {
		return notChecked("AWS not configured: no credentials: " + err.Error())
	}
	return check.CheckGroups(ctx, nodes.Items, autoscaling.NewFromConfig(awsCfg),
		check.GroupOptions{NodeRepair: cfg.EnableNodeRepair, RepairAction: cfg.NodeRepairAction})
}
