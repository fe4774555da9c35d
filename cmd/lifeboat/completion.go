// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"lifeboat.dev/lifeboat/internal/check"
	"lifeboat.dev/lifeboat/internal/output"
	"lifeboat.dev/lifeboat/internal/status"
)

// completionHelper is the executable kubectl runs to complete a plugin's arguments
// (kubectl_complete-<plugin> on PATH); the binary is its own helper under that name.
const completionHelper = "kubectl_complete-lifeboat"

// completionTimeout bounds a completion that asks the cluster: the shell waits on it.
const completionTimeout = 5 * time.Second

// versionFormats are the -o values version offers.
var versionFormats = []string{output.Table, output.JSON, output.YAML, output.JSONPath}

// helperArgs turns the words kubectl passes its completion helper (the plugin's arguments,
// the word being completed last) into cobra's hidden completion command.
func helperArgs(args []string) []string {
	if len(args) > 0 && strings.HasPrefix(args[0], cobra.ShellCompRequestCmd) {
		return args // already a completion request, as a person testing the helper may type
	}
	return append([]string{cobra.ShellCompRequestCmd}, args...)
}

// registerCompletions completes the global flags' values: -o, --context, --cluster, --user
// from the kubeconfig, and -n from the cluster.
func registerCompletions(root *cobra.Command, kube *kubeFlags) {
	for name, fn := range map[string]cobra.CompletionFunc{
		"output":    completeFormats,
		"context":   kube.completeKubeconfig(func(c *clientcmdapi.Config) []string { return slices.Collect(maps.Keys(c.Contexts)) }),
		"cluster":   kube.completeKubeconfig(func(c *clientcmdapi.Config) []string { return slices.Collect(maps.Keys(c.Clusters)) }),
		"user":      kube.completeKubeconfig(func(c *clientcmdapi.Config) []string { return slices.Collect(maps.Keys(c.AuthInfos)) }),
		"namespace": kube.completeNamespaces,
	} {
		// Errors only for a flag that does not exist: a programming error the tests catch.
		if err := root.RegisterFlagCompletionFunc(name, fn); err != nil {
			panic(err)
		}
	}
}

// completeFormats offers the -o values of the command being completed.
func completeFormats(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	formats := status.Formats
	switch cmd.Name() {
	case "check":
		formats = check.Formats
	case "version":
		formats = versionFormats
	}
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f
		if f == output.JSONPath {
			names[i] += "=" // a template follows
		}
	}
	out := withPrefix(names, toComplete)
	if len(out) == 1 && out[0] == output.JSONPath+"=" {
		// No space after it: the template is typed right after the "=".
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeKubeconfig offers the names the kubeconfig (as --kubeconfig, KUBECONFIG or
// ~/.kube/config give it) holds, as kubectl does for its flags.
func (k *kubeFlags) completeKubeconfig(names func(*clientcmdapi.Config) []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cfg, err := k.loadingRules().Load()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return withPrefix(names(cfg), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNamespaces offers the cluster's namespaces; nothing, silently, when it cannot ask.
func (k *kubeFlags) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	client, err := k.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	list, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// withPrefix is the names that start with what was typed, sorted.
func withPrefix(names []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
