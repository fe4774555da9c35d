// Package kube builds Kubernetes clients from Lifeboat's configuration.
package kube

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/version"
)

// In-cluster credentials, mounted into every pod with a service account.
const (
	serviceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	serviceAccountCA    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// RESTConfig returns the client configuration: the kubeconfig file(s) when KUBECONFIG or
// --kubeconfig names them, else the pod's service account and KUBERNETES_SERVICE_HOST / _PORT
// (which may come from flags, so rest.InClusterConfig's env-only lookup is not used).
// Rate limits come from KUBE_API_QPS / KUBE_API_BURST.
func RESTConfig(c *config.Config) (*rest.Config, error) {
	var rc *rest.Config
	switch {
	case c.Kubeconfig != "":
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(c.Kubeconfig)}
		var err error
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("KUBECONFIG=%q: %w", c.Kubeconfig, err)
		}
	case c.KubernetesServiceHost != "" && c.KubernetesServicePort != "":
		if _, err := os.Stat(serviceAccountToken); err != nil {
			return nil, fmt.Errorf("in-cluster configuration: service account token: %w (outside a pod, set KUBECONFIG)", err)
		}
		rc = &rest.Config{
			Host:            "https://" + net.JoinHostPort(c.KubernetesServiceHost, c.KubernetesServicePort),
			TLSClientConfig: rest.TLSClientConfig{CAFile: serviceAccountCA},
			BearerTokenFile: serviceAccountToken,
		}
	default:
		return nil, fmt.Errorf("no Kubernetes API configured: set KUBECONFIG (or --kubeconfig), or run in a pod where KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are set")
	}
	rc.QPS = float32(c.KubeAPIQPS)
	rc.Burst = c.KubeAPIBurst
	rc.UserAgent = version.UserAgent()
	return rc, nil
}

// NewClientset builds a typed client.
func NewClientset(rc *rest.Config) (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}
