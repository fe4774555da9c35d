package drain

import (
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
)

// OptionsFromConfig maps Lifeboat's configuration onto drain options: the pod filters, the
// grace override, the list source (USE_APISERVER_CACHE: watch cache, else a quorum read), the
// force option and dry-run.
func OptionsFromConfig(c *config.Config, client kubernetes.Interface, logger *slog.Logger) Options {
	return Options{
		Policy: Policy{
			IgnoreDaemonSets: c.IgnoreDaemonSets,
			DeleteLocalData:  c.DeleteLocalData,
			OwnPod:           types.NamespacedName{Namespace: c.PodNamespace, Name: c.PodName},
		},
		Lister:              APILister{Client: client, Quorum: !c.UseAPIServerCache},
		PodGracePeriod:      c.PodTerminationGracePeriod,
		ForceBeforeDeadline: time.Duration(c.ForceDeleteBeforeDeadline) * time.Second,
		DryRun:              c.DryRun,
		Logger:              logger,
	}
}
