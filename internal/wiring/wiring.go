// SPDX-License-Identifier: Apache-2.0

// Package wiring maps Lifeboat's configuration (the settings an operator writes, NTH's
// names) onto the options of the parts that do the work. The parts (drain, events, kube,
// webhook) know nothing of the configuration: each takes only what it uses, so it can be read,
// tested and reused on its own. The functions here only map settings; building the parts
// from them (clients, waits, the mode's driver) is the composition root's, package daemon.
package wiring

import (
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/webhook"
)

// Drain is the drain's options: the pod filters, the grace override, the list source
// (USE_APISERVER_CACHE: watch cache, else a quorum read), the force option and dry-run.
func Drain(c *config.Config, client kubernetes.Interface, logger *slog.Logger) drain.Options {
	return drain.Options{
		Policy: drain.Policy{
			IgnoreDaemonSets: c.IgnoreDaemonSets,
			DeleteLocalData:  c.DeleteLocalData,
			OwnPod:           types.NamespacedName{Namespace: c.PodNamespace, Name: c.PodName},
		},
		Lister:              drain.APILister{Client: client, Quorum: !c.UseAPIServerCache},
		PodGracePeriod:      c.PodTerminationGracePeriod,
		ForceBeforeDeadline: time.Duration(c.ForceDeleteBeforeDeadline) * time.Second,
		DryRun:              c.DryRun,
		Logger:              logger,
	}
}

// Events is the Event recorder's options; dropped counts the Events it could not write.
func Events(c *config.Config, logger *slog.Logger, dropped events.DropCounter) events.Options {
	return events.Options{Enabled: c.EmitKubernetesEvents, ExtraAnnotations: c.KubernetesEventsExtraAnnotations,
		Host: c.NodeName, DryRun: c.DryRun, Logger: logger, Dropped: dropped}
}

// Webhook is the webhook's settings.
func Webhook(c *config.Config) webhook.Settings {
	return webhook.Settings{URL: c.WebhookURL, Proxy: c.WebhookProxy, Headers: c.WebhookHeaders,
		Template: c.WebhookTemplate, TemplateFile: c.WebhookTemplateFile, NTHKinds: c.WebhookNTHKinds}
}

// readOnlyQPS is the rate of the read-only commands (status, check, preflight) when
// KUBE_API_QPS is 0: they are short-lived and stay outside the shared budget.
const readOnlyQPS = 100

// Kube is where the Kubernetes API is, and the fixed rate limit of clients outside the shared
// budget (the read-only commands): KUBE_API_QPS, or readOnlyQPS when it is 0.
func Kube(c *config.Config) kube.Options {
	qps := c.KubeAPIQPS
	if qps == 0 {
		qps = readOnlyQPS
	}
	return kube.Options{Kubeconfig: c.Kubeconfig, ServiceHost: c.KubernetesServiceHost, ServicePort: c.KubernetesServicePort,
		QPS: qps, Burst: c.KubeAPIBurst}
}
