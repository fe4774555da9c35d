// SPDX-License-Identifier: Apache-2.0

// Package kube builds Kubernetes clients.
package kube

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"lifeboat.dev/lifeboat/internal/version"
)

// In-cluster credentials, mounted into every pod with a service account.
const (
	serviceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	serviceAccountCA    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// Options say where the API server is and how fast to call it.
type Options struct {
	// Kubeconfig lists kubeconfig files (KUBECONFIG or --kubeconfig), separated as in a PATH.
	Kubeconfig string
	// ServiceHost and ServicePort are KUBERNETES_SERVICE_HOST / _PORT, used with the pod's
	// service account when Kubeconfig is empty.
	ServiceHost, ServicePort string
	// QPS and Burst are the client's rate limit (KUBE_API_QPS / KUBE_API_BURST).
	QPS   float64
	Burst int
}

// RESTConfig returns the client configuration: the kubeconfig file(s) when Kubeconfig names
// them, else the pod's service account and ServiceHost / ServicePort (which may come from
// flags, so rest.InClusterConfig's env-only lookup is not used).
func RESTConfig(c Options) (*rest.Config, error) {
	var rc *rest.Config
	switch {
	case c.Kubeconfig != "":
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(c.Kubeconfig)}
		var err error
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("KUBECONFIG=%q: %w", c.Kubeconfig, err)
		}
	case c.ServiceHost != "" && c.ServicePort != "":
		if _, err := os.Stat(serviceAccountToken); err != nil {
			return nil, fmt.Errorf("in-cluster configuration: service account token: %w (outside a pod, set KUBECONFIG)", err)
		}
		rc = &rest.Config{
			Host:            "https://" + net.JoinHostPort(c.ServiceHost, c.ServicePort),
			TLSClientConfig: rest.TLSClientConfig{CAFile: serviceAccountCA},
			BearerTokenFile: serviceAccountToken,
		}
	default:
		return nil, fmt.Errorf("no Kubernetes API configured: set KUBECONFIG (or --kubeconfig), or run in a pod where KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are set")
	}
	rc.QPS = float32(c.QPS)
	rc.Burst = c.Burst
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
