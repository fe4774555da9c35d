// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"lifeboat.dev/lifeboat/internal/version"
)

// readOnlyQPS is the read-only commands' client rate: short-lived, outside any shared budget.
const readOnlyQPS = 100

// kubeFlags are kubectl's connection flags, loaded as kubectl loads them: --kubeconfig, else
// KUBECONFIG, else ~/.kube/config, else the pod's service account; --context, --cluster,
// --user, -n and the rest override what the kubeconfig says.
type kubeFlags struct {
	lookupEnv     func(string) (string, bool)
	explicitPath  string
	overrides     clientcmd.ConfigOverrides
	allNamespaces bool
}

func newKubeFlags(lookupEnv func(string) (string, bool)) *kubeFlags {
	return &kubeFlags{lookupEnv: lookupEnv}
}

func (k *kubeFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&k.explicitPath, "kubeconfig", "", "Path to the kubeconfig file (default: KUBECONFIG, else ~/.kube/config)")
	clientcmd.BindOverrideFlags(&k.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.BoolVarP(&k.allNamespaces, "all-namespaces", "A", false, "Every namespace (check's default)")
}

// loadingRules are kubectl's, read from the given environment.
func (k *kubeFlags) loadingRules() *clientcmd.ClientConfigLoadingRules {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: k.explicitPath}
	if v, ok := k.lookupEnv(clientcmd.RecommendedConfigPathEnvVar); ok && v != "" {
		rules.Precedence = filepath.SplitList(v)
	} else if home, ok := k.lookupEnv("HOME"); ok && home != "" {
		rules.Precedence = []string{filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	return rules
}

func (k *kubeFlags) clientConfig() clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(k.loadingRules(), &k.overrides)
}

// restConfig is the connection the flags and the environment describe, with an error that
// says what to set when there is none.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	rc, err := k.clientConfig().ClientConfig()
	switch {
	case err == nil:
	case clientcmd.IsEmptyConfig(err):
		return nil, fmt.Errorf("no Kubernetes configuration: no kubeconfig found (--kubeconfig, KUBECONFIG, ~/.kube/config) and not running in a pod")
	case k.explicitPath != "":
		return nil, fmt.Errorf("--kubeconfig %s: %w", k.explicitPath, err)
	default:
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = readOnlyQPS, 2*readOnlyQPS
	rc.UserAgent = version.UserAgent()
	return rc, nil
}

func (k *kubeFlags) client() (kubernetes.Interface, error) {
	rc, err := k.restConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// namespace is the namespace -n names; "" when not given or with -A.
func (k *kubeFlags) namespace() string {
	if k.allNamespaces {
		return ""
	}
	return k.overrides.Context.Namespace
}
