// SPDX-License-Identifier: Apache-2.0

package status_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/status"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestStatusSaysBelowSizing: a controller Deployment the chart marked below its sizing is
// said first by status, with the chart's reason, for a reader with the reader role's
// permissions; a reader who may not list Deployments gets the rest of the report.
func TestStatusSaysBelowSizing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	const ns, why = "sizing", "memory limit 256Mi (NTH's resources) is below 512Mi, the size for an Availability Zone reclaimed at once"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	deployment := func(name string, marked bool) {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}}}
		if marked {
			d.Labels[status.AnnotationBelowSizing] = "true"
			d.Annotations = map[string]string{status.AnnotationBelowSizing: why}
		}
		if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Client.AppsV1().Deployments(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	deployment("lifeboat-controller", true)
	deployment("shop", false)
	loaded, err := config.Load(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}

	report, err := status.Collect(ctx, sandboxtest.ClientWith(t, ctx, c, "sizing-reader", deploy.ReaderPermissions), loaded.Config, time.Now(), status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []status.BelowSizing{{Deployment: ns + "/lifeboat-controller", Why: why}}; len(report.BelowSizing) != 1 || report.BelowSizing[0] != want[0] {
		t.Errorf("below sizing %+v, want %+v", report.BelowSizing, want)
	}
	var table bytes.Buffer
	if err := status.Print(&table, report, status.FormatTable); err != nil {
		t.Fatal(err)
	}
	if out := table.String(); !strings.HasPrefix(out, "BELOW SIZING") || !strings.Contains(out, ns+"/lifeboat-controller: "+why) {
		t.Errorf("the table does not say it first:\n%s", out)
	}

	nodesOnly := []authorizationv1.ResourceAttributes{{Resource: "nodes", Verb: "list"}}
	report, err = status.Collect(ctx, sandboxtest.ClientWith(t, ctx, c, "sizing-nodes-only", nodesOnly), loaded.Config, time.Now(), status.Options{})
	if err != nil || len(report.BelowSizing) != 0 {
		t.Errorf("a reader without Deployments: %+v, %v; want the report without them", report, err)
	}
}
