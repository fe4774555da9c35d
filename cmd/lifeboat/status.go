// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/detach/targets"
	"lifeboat.dev/lifeboat/internal/output"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/status"
)

// statusSettings are the daemon's settings status reads (the drain's policy and the notices'
// plans, as the running Lifeboat has them, and the region of --load-balancers); no other
// setting can stop it.
var statusSettings = []string{"IGNORE_DAEMON_SETS", "DELETE_LOCAL_DATA", "POD_TERMINATION_GRACE_PERIOD", "CORDON_ONLY",
	"ENABLE_REBALANCE_DRAINING", "TAINT_NODE", "EXCLUDE_FROM_LOAD_BALANCERS", "AWS_REGION", "AWS_ENDPOINT"}

func (a *app) statusCommand() *cobra.Command {
	var loadBalancers, watchNodes bool
	cmd := &cobra.Command{
		Use:   "status [NODE...]",
		Short: "Show the nodes in an interruption episode and what holds each",
		Long: `Status shows every node in an interruption episode (or the named nodes): its notices, phase,
deadline and time left, the pods still on it and what holds each (a PodDisruptionBudget, a
do-not-disrupt mark, a policy), the volumes attached and the lifecycle actions pending. It reads
what Lifeboat recorded on the Nodes and changes nothing.

Output formats: table (default), wide, name, json, yaml, jsonpath=TEMPLATE.`,
		Example: `  lifeboat status
  lifeboat status ip-10-0-1-23.ec2.internal -o yaml
  lifeboat status -w
  kubectl lifeboat status --context prod -o jsonpath='{.nodes[*].name}'`,
		GroupID:           groupRead,
		ValidArgsFunction: a.completeNodes,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := output.Parse(a.output, status.Formats...)
			if err != nil {
				return usageError("%v", err)
			}
			loaded, err := config.LoadOnly(statusSettings, a.lookupEnv)
			if err != nil {
				return usageError("%v", err)
			}
			cfg := loaded.Config
			if loadBalancers && cfg.AWSRegion == "" {
				return usageError("--load-balancers needs AWS_REGION: the region of the cluster's load balancers")
			}
			client, err := a.kube.client()
			if err != nil {
				return usageError("%v", err)
			}
			opts := status.Options{Nodes: args}
			if loadBalancers {
				// The hand-back's own target reader: the same calls, the same idea of "held".
				awsCfg, err := cloud.LoadAWSConfig(cmd.Context(), cfg.AWSRegion, cfg.AWSEndpoint)
				if err != nil {
					return usageError("--load-balancers needs AWS credentials and AWS_REGION: %v", err)
				}
				opts.Targets = targets.New(cloud.NewAWSLoadBalancing(awsCfg), targets.Options{})
			}
			return a.status(cmd.Context(), client, cfg, opts, f, watchNodes)
		},
	}
	cmd.Flags().BoolVar(&loadBalancers, "load-balancers", false, "Also ask ELBv2 (AWS credentials, AWS_REGION) which target groups still hold each instance or its pods' IPs")
	cmd.Flags().BoolVarP(&watchNodes, "watch", "w", false, "After the first report, print each node again as its episode changes, until interrupted")
	return cmd
}

// status prints the report, then, with watch, each node again as its record changes.
func (a *app) status(ctx context.Context, client kubernetes.Interface, cfg *config.Config, opts status.Options, f output.Format, watchNodes bool) error {
	report, err := status.Collect(ctx, client, cfg, time.Now(), opts)
	if err != nil {
		return runtimeError(err)
	}
	if err := status.PrintFormat(a.stdout, report, f); err != nil {
		return runtimeError(err)
	}
	if !watchNodes {
		return nil
	}
	err = a.watchStatus(ctx, client, cfg, opts, f, len(report.Nodes) > 0)
	if err != nil && ctx.Err() == nil {
		return runtimeError(err)
	}
	return nil
}

// watchStatus prints a node each time its episode record changes (or the node goes), as
// kubectl get -w prints objects: rows without a header for tables, one object per change
// otherwise.
func (a *app) watchStatus(ctx context.Context, client kubernetes.Interface, cfg *config.Config, opts status.Options, f output.Format, headerShown bool) error {
	seen := map[string]string{}
	w, err := watchNodes(ctx, client, opts.Nodes, seen)
	if err != nil {
		return err
	}
	defer w.Stop()
	named := map[string]bool{}
	for _, n := range opts.Nodes {
		named[n] = true
	}
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the watch of nodes ended")
			}
			ev = e
		}
		if ev.Type == watch.Error {
			return apierrors.FromObject(ev.Object)
		}
		node, ok := ev.Object.(*corev1.Node)
		if !ok || (len(named) > 0 && !named[node.Name]) {
			continue
		}
		record := node.Annotations[record.Annotation]
		if ev.Type == watch.Deleted {
			record = "(deleted)"
		}
		if prev, known := seen[node.Name]; known && prev == record {
			continue // a change that is not the episode's
		}
		seen[node.Name] = record
		if err := a.printChange(ctx, client, cfg, opts, f, node.Name, ev.Type == watch.Deleted, &headerShown); err != nil {
			return err
		}
	}
}

// watchNodes lists the nodes (the one named, when one is) into seen, by their episode record,
// and watches them from there, reconnecting as needed.
func watchNodes(ctx context.Context, client kubernetes.Interface, names []string, seen map[string]string) (*watchtools.RetryWatcher, error) {
	selector := fields.Everything()
	if len(names) == 1 {
		selector = fields.OneTermEqualSelector("metadata.name", names[0])
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector.String()
			return client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector.String()
			return client.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	for _, n := range list.Items {
		seen[n.Name] = n.Annotations[record.Annotation]
	}
	return watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
}

// printChange prints one node as it is now.
func (a *app) printChange(ctx context.Context, client kubernetes.Interface, cfg *config.Config, opts status.Options, f output.Format,
	node string, deleted bool, headerShown *bool) error {
	if deleted {
		if f.Structured() {
			return nil
		}
		_, err := fmt.Fprintf(a.stdout, "%s\tdeleted\n", node)
		return err
	}
	opts.Nodes = []string{node}
	report, err := status.Collect(ctx, client, cfg, time.Now(), opts)
	if apierrors.IsNotFound(errors.Unwrap(err)) {
		return nil // gone meanwhile: the deletion comes next
	}
	if err != nil {
		return err
	}
	if f.Structured() || f.Name == output.Name {
		return status.PrintFormat(a.stdout, report, f)
	}
	if !*headerShown {
		fmt.Fprintln(a.stdout, status.Header(f.Name == output.Wide))
		*headerShown = true
	}
	return status.PrintRows(a.stdout, report, f.Name == output.Wide)
}

// completeNodes offers the cluster's node names.
func (a *app) completeNodes(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	client, err := a.kube.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []cobra.Completion
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
