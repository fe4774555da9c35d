// SPDX-License-Identifier: Apache-2.0

package wiring

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/drain"
)

func TestDrain(t *testing.T) {
	lookup := func(env map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	}
	defaults, err := config.Load(nil, lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	o := Drain(defaults.Config, nil, nil)
	if !o.IgnoreDaemonSets || !o.DeleteLocalData || o.PodGracePeriod != -1 || o.ForceBeforeDeadline != 0 || o.DryRun {
		t.Errorf("defaults: %+v", o)
	}
	if l, ok := o.Lister.(drain.APILister); !ok || l.Quorum {
		t.Errorf("default lister %#v, want the watch cache", o.Lister)
	}

	set, err := config.Load(nil, lookup(map[string]string{
		"USE_APISERVER_CACHE": "false", "IGNORE_DAEMON_SETS": "false", "DELETE_LOCAL_DATA": "false",
		"POD_TERMINATION_GRACE_PERIOD": "20", "FORCE_DELETE_BEFORE_DEADLINE_SECONDS": "15", "DRY_RUN": "true",
		"POD_NAME": "lifeboat-x", "NAMESPACE": "ops",
	}))
	if err != nil {
		t.Fatal(err)
	}
	o = Drain(set.Config, nil, nil)
	if o.IgnoreDaemonSets || o.DeleteLocalData || o.PodGracePeriod != 20 || o.ForceBeforeDeadline != 15*time.Second || !o.DryRun ||
		o.OwnPod != (types.NamespacedName{Namespace: "ops", Name: "lifeboat-x"}) {
		t.Errorf("configured: %+v", o)
	}
	if l := o.Lister.(drain.APILister); !l.Quorum {
		t.Error("USE_APISERVER_CACHE=false must list with a quorum read")
	}
}
