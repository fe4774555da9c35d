// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// A cluster shared by the tests of a package (sandboxtest.Shared) is handed to one test at a
// time and put back as it was: Snapshot records what a fresh control plane holds, and Reset
// deletes everything a test added since, in every namespace and cluster-wide (Nodes, Leases,
// RBAC, admission policies and webhooks, namespaces and all they hold). Objects that existed at
// the snapshot are kept by name, so the control plane's own (bootstrap RBAC, priority
// classes, flow schemas, kube-system's ConfigMaps) survive. A test that changes one of those
// in place, rather than adding its own, needs a cluster of its own.

// resetResource is one listable, deletable resource.
type resetResource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// kept are objects the control plane makes again in any namespace, whenever they are
// missing: deleting them only makes work.
var kept = map[string]bool{
	"configmaps/kube-root-ca.crt": true, // kube-controller-manager's root CA publisher
	"serviceaccounts/default":     true, // kube-controller-manager's service account controller
}

// resetFirst are deleted before the rest: admission that could refuse the other deletions,
// and controllers' owners before what they own, so nothing is made again meanwhile.
var resetFirst = []string{
	"validatingadmissionpolicybindings", "validatingadmissionpolicies",
	"mutatingadmissionpolicybindings", "mutatingadmissionpolicies",
	"validatingwebhookconfigurations", "mutatingwebhookconfigurations",
	"deployments", "statefulsets", "daemonsets", "cronjobs", "jobs", "replicasets", "replicationcontrollers",
	"poddisruptionbudgets",
}

// quietConfig is the admin configuration without deprecation warnings (v1 Endpoints) in the
// test's output.
func (c *Cluster) quietConfig() *rest.Config {
	rc := rest.CopyConfig(c.AdminConfig)
	rc.WarningHandler = rest.NoWarnings{}
	return rc
}

func (c *Cluster) resetResources() ([]resetResource, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.quietConfig())
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discover resources: %w", err)
	}
	var out []resetResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerbs(r.Verbs, "list", "delete") {
				continue
			}
			out = append(out, resetResource{gvr: gv.WithResource(r.Name), namespaced: r.Namespaced})
		}
	}
	rank := map[string]int{}
	for i, name := range resetFirst {
		rank[name] = i + 1
	}
	order := func(r resetResource) int {
		if n, ok := rank[r.gvr.Resource]; ok {
			return n
		}
		return len(resetFirst) + 1
	}
	sort.SliceStable(out, func(i, j int) bool { return order(out[i]) < order(out[j]) })
	return out, nil
}

func hasVerbs(have metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

func objectKey(r resetResource, namespace, name string) string {
	return r.gvr.GroupResource().String() + "/" + namespace + "/" + name
}

// Snapshot records the objects the cluster holds now as the state Reset returns it to.
func (c *Cluster) Snapshot(ctx context.Context) error {
	resources, err := c.resetResources()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.quietConfig())
	if err != nil {
		return err
	}
	base := map[string]bool{}
	for _, r := range resources {
		list, err := dyn.Resource(r.gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				continue
			}
			return fmt.Errorf("snapshot %s: %w", r.gvr, err)
		}
		for _, o := range list.Items {
			base[objectKey(r, o.GetNamespace(), o.GetName())] = true
		}
	}
	c.baseline, c.resetList = base, resources
	return nil
}

// Reset deletes every object that was not there at Snapshot (pods at once, without grace;
// finalizers cleared), namespaces last, and returns once a pass over the cluster finds
// nothing more to delete.
func (c *Cluster) Reset(ctx context.Context) error {
	if c.baseline == nil {
		return errors.New("reset: no snapshot taken")
	}
	dyn, err := dynamic.NewForConfig(c.quietConfig())
	if err != nil {
		return err
	}
	for pass := 0; ; pass++ {
		deleted, err := c.resetPass(ctx, dyn)
		if err != nil {
			return err
		}
		if deleted == 0 {
			return nil
		}
		if pass == 20 {
			return fmt.Errorf("reset: objects still being created after %d passes", pass)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// resetPass deletes what it finds beyond the snapshot and says how many objects that was.
func (c *Cluster) resetPass(ctx context.Context, dyn dynamic.Interface) (int, error) {
	zero := int64(0)
	background := metav1.DeletePropagationBackground
	deleted := 0
	var namespaces []string
	for _, r := range c.resetList {
		list, err := dyn.Resource(r.gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				continue
			}
			return deleted, fmt.Errorf("reset: list %s: %w", r.gvr, err)
		}
		for _, o := range list.Items {
			ns, name := o.GetNamespace(), o.GetName()
			if c.baseline[objectKey(r, ns, name)] || kept[r.gvr.Resource+"/"+name] {
				continue
			}
			if r.gvr.Group == "" && r.gvr.Resource == "namespaces" {
				namespaces = append(namespaces, name)
				continue
			}
			res := dyn.Resource(r.gvr)
			var client dynamic.ResourceInterface = res
			if r.namespaced {
				client = res.Namespace(ns)
			}
			if len(o.GetFinalizers()) > 0 {
				_, err := client.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return deleted, fmt.Errorf("reset: clear finalizers of %s %s/%s: %w", r.gvr.Resource, ns, name, err)
				}
			}
			// Also when it is terminating already: a pod waits for its kubelet, which for a
			// Node deleted or never run by kwok never confirms; grace 0 removes it at once.
			err := client.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &background})
			if err != nil && !apierrors.IsNotFound(err) {
				return deleted, fmt.Errorf("reset: delete %s %s/%s: %w", r.gvr.Resource, ns, name, err)
			}
			deleted++
		}
	}
	// Their contents are gone; without kube-controller-manager nothing would remove the
	// namespaces' own finalizer.
	for _, name := range namespaces {
		ns, err := c.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return deleted, fmt.Errorf("reset: namespace %s: %w", name, err)
		}
		if ns.DeletionTimestamp == nil {
			if err := c.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return deleted, fmt.Errorf("reset: delete namespace %s: %w", name, err)
			}
			if ns, err = c.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				deleted++
				continue
			} else if err != nil {
				return deleted, fmt.Errorf("reset: namespace %s: %w", name, err)
			}
		}
		if len(ns.Spec.Finalizers) > 0 {
			ns.Spec.Finalizers = []corev1.FinalizerName{}
			if _, err := c.Client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return deleted, fmt.Errorf("reset: finalize namespace %s: %w", name, err)
			}
		}
		deleted++
	}
	return deleted, nil
}

// SkipAudit makes AuditEvents return only the requests logged from now on, for a test that
// takes over a shared cluster.
func (c *Cluster) SkipAudit() error {
	if c.AuditLogPath == "" {
		return nil
	}
	f, err := os.Open(c.AuditLogPath)
	if err != nil {
		return err
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	c.auditFrom = end
	return nil
}
