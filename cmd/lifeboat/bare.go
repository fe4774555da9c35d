// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"lifeboat.dev/lifeboat/internal/config"
)

// shellSettings are settings an operator's shell sets for other tools (kubectl, the AWS CLI,
// many programs' logs): finding one says nothing about wanting the daemon.
var shellSettings = map[string]bool{"KUBECONFIG": true, "AWS_REGION": true, "LOG_LEVEL": true}

// bareHint follows the help when bare lifeboat has nothing to run.
const bareHint = "No command, and no daemon settings outside a pod: try 'lifeboat status' or 'lifeboat check'; the daemon runs as 'lifeboat agent' or 'lifeboat controller'."

// onWorkstation reports whether a command line without a command was typed by a person rather
// than started by the DaemonSet or Deployment: no pod around it (Kubernetes sets
// KUBERNETES_SERVICE_HOST in every container), none of the daemon's or NTH's settings in the
// environment, and nothing on the line but the global flags --help lists. Anything else keeps
// NTH's start-up: the daemon, its mode chosen by ENABLE_SQS_TERMINATION_DRAINING.
func onWorkstation(root *cobra.Command, args []string, lookupEnv func(string) (string, bool)) bool {
	if v, ok := lookupEnv("KUBERNETES_SERVICE_HOST"); ok && v != "" {
		return false
	}
	for _, s := range config.Settings() {
		for _, name := range append([]string{s.Env}, s.Aliases...) {
			// An empty variable counts as unset, as for the settings themselves.
			if v, ok := lookupEnv(name); ok && v != "" && !shellSettings[name] {
				return false
			}
		}
	}
	return onlyGlobalFlags(root, args)
}

// onlyGlobalFlags reports whether args are nothing but root's persistent flags and their values.
func onlyGlobalFlags(root *cobra.Command, args []string) bool {
	fs := pflag.NewFlagSet(root.Name(), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// A copy: parsing here must not set what the commands read.
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		fs.AddFlag(&pflag.Flag{Name: f.Name, Shorthand: f.Shorthand, Usage: f.Usage, NoOptDefVal: f.NoOptDefVal,
			Value: &anyValue{typ: f.Value.Type()}})
	})
	return fs.Parse(args) == nil && fs.NArg() == 0 && fs.ArgsLenAtDash() == -1
}

// bareHelp prints the commands and a hint, as kubectl does with no command: exit 0.
func (a *app) bareHelp(root *cobra.Command) int {
	if err := root.Help(); err != nil {
		fmt.Fprintf(a.stderr, "%s: %v\n", root.DisplayName(), err)
		return exitRuntime
	}
	fmt.Fprintln(a.stdout, bareHint)
	return exitOK
}

// anyValue accepts any value for a flag of the given type.
type anyValue struct{ typ string }

func (v *anyValue) String() string   { return "" }
func (v *anyValue) Set(string) error { return nil }
func (v *anyValue) Type() string     { return v.typ }
