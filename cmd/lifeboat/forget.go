// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"lifeboat.dev/lifeboat/internal/forget"
	"lifeboat.dev/lifeboat/internal/output"
)

// forgetCommand is `lifeboat forget` with its flags.
type forgetCommand struct {
	a        *app
	apply    bool
	selector string
}

func (fc *forgetCommand) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "forget [NODE...]",
		Short: "Remove what Lifeboat wrote on Nodes (a dry run unless --yes)",
		Long: `Forget finds what Lifeboat wrote on the Nodes (every node, the named ones, or those -l
selects) and, with --yes, removes it: its record and notes (lifeboat.dev/ annotations), its
labels, the interruption taints its record names, its node condition lifeboat.dev/Interruption,
and the cordons it made (marked lifeboat.dev/cordoned). A cordon without that mark is an
operator's and stays; so do NTH's or an operator's taints, and the node-repair veto. Without
--yes it changes nothing and prints what it would remove.

Stop Lifeboat first (helm uninstall): a running Lifeboat writes again what forget removes.
Needs get, list and patch on nodes, and patch on nodes/status.

Output formats: table (default), name, json, yaml, jsonpath=TEMPLATE.`,
		Example: `  lifeboat forget
  lifeboat forget --yes
  lifeboat forget ip-10-0-1-23.ec2.internal --yes
  kubectl lifeboat forget -l eks.amazonaws.com/nodegroup=workers -o json`,
		GroupID:           groupCleanup,
		ValidArgsFunction: fc.a.completeNodes,
		RunE:              fc.run,
	}
	cmd.Flags().BoolVar(&fc.apply, strings.TrimPrefix(forget.ApplyFlag, "--"), false, "Remove what is found; without it, only print what would be removed")
	cmd.Flags().StringVarP(&fc.selector, "selector", "l", "", "Label selector over the nodes, as kubectl's -l (default: every node)")
	return cmd
}

func (fc *forgetCommand) run(cmd *cobra.Command, args []string) error {
	f, err := output.Parse(fc.a.output, forget.Formats...)
	if err != nil {
		return usageError("%v", err)
	}
	if _, err := labels.Parse(fc.selector); err != nil {
		return usageError("-l %q: %v", fc.selector, err)
	}
	if len(args) > 0 && fc.selector != "" {
		return usageError("name nodes or give a selector (-l), not both")
	}
	client, err := fc.a.kube.client()
	if err != nil {
		return usageError("%v", err)
	}
	found, runErr := forget.Run(cmd.Context(), client, forget.Options{Nodes: args, Selector: fc.selector, Apply: fc.apply})
	if err := forget.PrintFormat(fc.a.stdout, found, !fc.apply, f); err != nil {
		return runtimeError(err)
	}
	if runErr != nil {
		return runtimeError(runErr) // forbidden, a node not found, a write that failed
	}
	return nil
}
