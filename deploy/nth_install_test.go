// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/webhook"
	"lifeboat.dev/lifeboat/test/nth"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// Values files as NTH users write them.
const (
	nthQueueValues = `
enableSqsTerminationDraining: true
queueURL: https://sqs.eu-west-1.amazonaws.com/123456789012/nth-prod
awsRegion: eu-west-1
replicas: 2
taintNode: true
deleteSqsMsgIfNodeNotFound: true
enablePrometheusServer: true
serviceAccount:
  annotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::123456789012:role/nth-prod
podDisruptionBudget:
  maxUnavailable: 1
serviceMonitor:
  create: true
  labels:
    release: kube-prometheus-stack
prometheusRule:
  enabled: true
resources:
  requests: {cpu: 50m, memory: 64Mi}
`
	nthIMDSValues = `
enableSqsTerminationDraining: false
enableASGLifecycleDraining: false
daemonsetPriorityClassName: nth-critical
daemonsetTolerations:
  - key: dedicated
    operator: Exists
    effect: NoSchedule
linuxNodeSelector:
  node.kubernetes.io/lifecycle: spot
enableRebalanceMonitoring: true
enableScheduledEventDraining: true
taintNode: true
emitKubernetesEvents: true
enableProbesServer: true
podAnnotations:
  team: platform
`
	nthWebhookValues = `
enableASGLifecycleDraining: true
webhookURLSecretName: nth-webhook
webhookTemplateConfigMapName: nth-webhook-template
webhookTemplateConfigMapKey: template.json
webhookHeaders: '{"Content-type":"application/json"}'
`
	// The template in the ConfigMap, with sprig functions as NTH users write them.
	nthWebhookTemplate = `{"text":"[NTH][Instance Interruption] {{ .Kind | lower }} on {{ .NodeName }} ({{ .InstanceID }}, {{ .AvailabilityZone }}){{ if eq .Kind "SPOT_ITN" }} - 2 minutes{{ end }}: {{ .Description | trimSuffix "." }}"}`
)

// TestNTHValuesFilesInstall installs NTH values files into the sandbox with helm, each as its
// own release, and checks that each is the equivalent Lifeboat release: NTH's defaults, queue
// mode with IRSA and a ServiceMonitor, IMDS mode with tolerations and a priority class, and a
// webhook whose template comes from a ConfigMap (rendered afterwards as NTH rendered it). A
// values file with an unknown key fails the install naming it.
func TestNTHValuesFilesInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sandbox cluster")
	}
	h := newHelm(t)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()

	if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nth-critical"}, Value: 1000000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "nth-webhook-template"}, Data: map[string]string{"template.json": nthWebhookTemplate}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	install := func(release, valuesFile string, extra ...string) (string, error) {
		args := append([]string{"install", release, chartDir, "--namespace", namespace, "--kubeconfig", c.KubeconfigPath, "--values", valuesFile}, extra...)
		return runTool(ctx, h.bin, h.env, args...)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	daemonSet := func(release string) *appsv1.DaemonSet {
		ds, err := c.Client.AppsV1().DaemonSets(namespace).Get(ctx, release+"-lifeboat-agent", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("release %s: %v", release, err)
		}
		return ds
	}
	deployment := func(release string) *appsv1.Deployment {
		d, err := c.Client.AppsV1().Deployments(namespace).Get(ctx, release+"-lifeboat-controller", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("release %s: %v", release, err)
		}
		return d
	}
	noWorkload := func(release, kind string) {
		var err error
		if kind == "DaemonSet" {
			_, err = c.Client.AppsV1().DaemonSets(namespace).Get(ctx, release+"-lifeboat-agent", metav1.GetOptions{})
		} else {
			_, err = c.Client.AppsV1().Deployments(namespace).Get(ctx, release+"-lifeboat-controller", metav1.GetOptions{})
		}
		if err == nil {
			t.Errorf("release %s installed a %s", release, kind)
		}
	}
	wantEnv := func(release string, spec corev1.PodSpec, want map[string]string) {
		t.Helper()
		env := envOf(t, container(t, spec))
		for k, v := range want {
			if got := env[k]; got.Value != v {
				t.Errorf("release %s: %s = %+v, want %q", release, k, got, v)
			}
		}
	}

	t.Run("NTH's defaults", func(t *testing.T) {
		out, err := install("nth-defaults", filepath.Join(nth.ChartDir(t), "values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		ds := daemonSet("nth-defaults")
		noWorkload("nth-defaults", "Deployment")
		spec := ds.Spec.Template.Spec
		if img := container(t, spec).Image; strings.Contains(img, "aws-node-termination-handler") {
			t.Errorf("image %s is NTH's", img)
		}
		// What NTH's values.yaml sets is kept as written, at NTH's defaults too: fsGroup and the
		// container's user and group 1000, its update strategy, probes and Events off, and
		// draining on the Auto Scaling target lifecycle state.
		if psc := spec.SecurityContext; psc.FSGroup == nil || *psc.FSGroup != 1000 || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Errorf("pod security context %+v, want NTH's fsGroup 1000 beside Lifeboat's defaults", psc)
		}
		if sc := container(t, spec).SecurityContext; sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.RunAsGroup == nil || *sc.RunAsGroup != 1000 {
			t.Errorf("container security context %+v, want NTH's user and group 1000", sc)
		}
		if u := ds.Spec.UpdateStrategy.RollingUpdate; u == nil || u.MaxUnavailable.String() != "25%" {
			t.Errorf("update strategy %+v, want NTH's maxUnavailable 25%%", ds.Spec.UpdateStrategy)
		}
		wantEnv("nth-defaults", spec, map[string]string{"ENABLE_PROBES_SERVER": "false", "EMIT_KUBERNETES_EVENTS": "false",
			"ENABLE_ASG_LIFECYCLE_DRAINING": "true", "TAINT_NODE": "false"})
		if spec.ServiceAccountName != "nth-defaults-aws-node-termination-handler" {
			t.Errorf("service account %q, want NTH's name for the release, nth-defaults-aws-node-termination-handler", spec.ServiceAccountName)
		}
		if !strings.Contains(out, `agent.serviceAccount.name = "nth-defaults-aws-node-termination-handler"`) {
			t.Errorf("the notes do not name NTH's ServiceAccount:\n%s", out)
		}
	})

	t.Run("queue mode, IRSA, ServiceMonitor", func(t *testing.T) {
		// The sandbox serves no ServiceMonitor or PrometheusRule (no Prometheus Operator CRDs):
		// the install fails naming both keys, in one message, where a release without its
		// monitor or alerts would go unnoticed.
		queueValues := write("queue.yaml", nthQueueValues)
		_, err := install("nth-queue", queueValues)
		for _, want := range []string{"serviceMonitor.create is true, and the cluster serves no monitoring.coreos.com/v1/ServiceMonitor",
			"prometheusRule.enabled is true, and the cluster serves no monitoring.coreos.com/v1/PrometheusRule"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("install with a ServiceMonitor and a PrometheusRule on a cluster without their CRDs: %v, want a refusal saying %q", err, want)
			}
		}
		out, err := install("nth-queue", queueValues, "--set", "serviceMonitor.create=false", "--set", "prometheusRule.enabled=false")
		if err != nil {
			t.Fatal(err)
		}
		noWorkload("nth-queue", "DaemonSet")
		d := deployment("nth-queue")
		if *d.Spec.Replicas != 2 {
			t.Errorf("replicas %d, want 2", *d.Spec.Replicas)
		}
		spec := d.Spec.Template.Spec
		wantEnv("nth-queue", spec, map[string]string{
			"ENABLE_SQS_TERMINATION_DRAINING": "true", "QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/nth-prod",
			"AWS_REGION": "eu-west-1", "TAINT_NODE": "true", "DELETE_SQS_MSG_IF_NODE_NOT_FOUND": "true", "ENABLE_PROMETHEUS_SERVER": "true",
		})
		if got := container(t, spec).Resources.Requests[corev1.ResourceMemory]; got.String() != "64Mi" {
			t.Errorf("memory request %s, want 64Mi", got.String())
		}
		sa, err := c.Client.CoreV1().ServiceAccounts(namespace).Get(ctx, spec.ServiceAccountName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sa.Name != "nth-queue-aws-node-termination-handler" {
			t.Errorf("controller's service account %q, want NTH's name for the release, nth-queue-aws-node-termination-handler", sa.Name)
		}
		if got := sa.Annotations["eks.amazonaws.com/role-arn"]; got != "arn:aws:iam::123456789012:role/nth-prod" {
			t.Errorf("service account %s role annotation %q", sa.Name, got)
		}
		if _, err := c.Client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, "nth-queue-lifeboat-controller", metav1.GetOptions{}); err != nil {
			t.Errorf("no PodDisruptionBudget: %v", err)
		}
		for _, want := range []string{
			"queueURL -> config.queueUrl", "enableSqsTerminationDraining -> controller.enabled = true, agent.enabled = false",
			"serviceAccount.annotations -> controller.serviceAccount.annotations",
			// NTH's resources (a 64Mi request, no limit) are kept, without a word on sizing.
			"resources -> controller.resources",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the notes do not say %q:\n%s", want, out)
			}
		}
	})

	t.Run("IMDS mode, tolerations, priority class", func(t *testing.T) {
		out, err := install("nth-imds", write("imds.yaml", nthIMDSValues))
		if err != nil {
			t.Fatal(err)
		}
		noWorkload("nth-imds", "Deployment")
		spec := daemonSet("nth-imds").Spec.Template.Spec
		if spec.PriorityClassName != "nth-critical" {
			t.Errorf("priority class %q, want nth-critical", spec.PriorityClassName)
		}
		if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "dedicated" || spec.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
			t.Errorf("tolerations %+v, want only dedicated:NoSchedule", spec.Tolerations)
		}
		if spec.NodeSelector["node.kubernetes.io/lifecycle"] != "spot" || spec.NodeSelector["kubernetes.io/os"] != "linux" {
			t.Errorf("node selector %v", spec.NodeSelector)
		}
		if !spec.HostNetwork {
			t.Error("the agent is off the host network")
		}
		if got := daemonSet("nth-imds").Spec.Template.Annotations["team"]; got != "platform" {
			t.Errorf("pod annotation team = %q", got)
		}
		wantEnv("nth-imds", spec, map[string]string{
			"ENABLE_SQS_TERMINATION_DRAINING": "false", "TAINT_NODE": "true", "ENABLE_REBALANCE_MONITORING": "true",
			"EMIT_KUBERNETES_EVENTS": "true", "ENABLE_PROBES_SERVER": "true",
		})
		if !strings.Contains(out, "daemonsetPriorityClassName -> agent.priorityClassName") {
			t.Errorf("the notes do not list the priority class:\n%s", out)
		}
	})

	t.Run("webhook template from a ConfigMap", func(t *testing.T) {
		if _, err := install("nth-webhook", write("webhook.yaml", nthWebhookValues)); err != nil {
			t.Fatal(err)
		}
		spec := daemonSet("nth-webhook").Spec.Template.Spec
		env := envOf(t, container(t, spec))
		if got := env["WEBHOOK_URL"].ValueFrom; got == nil || got.SecretKeyRef == nil || got.SecretKeyRef.Name != "nth-webhook" || got.SecretKeyRef.Key != "webhookurl" {
			t.Errorf("WEBHOOK_URL = %+v, want Secret nth-webhook key webhookurl (NTH's)", env["WEBHOOK_URL"])
		}
		wantEnv("nth-webhook", spec, map[string]string{"WEBHOOK_NTH_KINDS": "true", "WEBHOOK_TEMPLATE_FILE": "/etc/lifeboat/webhook-template/template.json"})
		var mounted bool
		for _, v := range spec.Volumes {
			if v.ConfigMap != nil && v.ConfigMap.Name == "nth-webhook-template" {
				for _, m := range container(t, spec).VolumeMounts {
					mounted = mounted || (m.Name == v.Name && m.MountPath == "/etc/lifeboat/webhook-template")
				}
			}
		}
		if !mounted {
			t.Errorf("the ConfigMap is not mounted at /etc/lifeboat/webhook-template: volumes %+v", spec.Volumes)
		}

		// The template as installed renders as NTH rendered it: NTH's kind names, sprig's functions.
		cm, err := c.Client.CoreV1().ConfigMaps(namespace).Get(ctx, "nth-webhook-template", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var body string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := make([]byte, 4096)
			n, _ := r.Body.Read(b)
			mu.Lock()
			body = string(b[:n])
			mu.Unlock()
		}))
		defer srv.Close()
		s, err := webhook.New(webhook.Settings{URL: srv.URL, Template: cm.Data["template.json"], NTHKinds: env["WEBHOOK_NTH_KINDS"].Value == "true"}, webhook.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(ctx, webhook.Notification{Kind: "spot-interruption", Monitor: "imds", NodeName: "ip-10-0-0-1",
			InstanceID: "i-0abc", ProviderID: "aws:///eu-west-1b/i-0abc", Description: "Spot interruption."}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := `{"text":"[NTH][Instance Interruption] spot_itn on ip-10-0-0-1 (i-0abc, eu-west-1b) - 2 minutes: Spot interruption"}`; body != want {
			t.Errorf("webhook body\n%s\nwant\n%s", body, want)
		}
	})

	t.Run("NTH's labels on an installed release", func(t *testing.T) {
		// Installed with Lifeboat's labels (as before nthLabels), then upgraded with NTH's: a
		// workload's selector cannot change, so the upgrade is refused naming what settles it.
		values := write("labels.yaml", "enableASGLifecycleDraining: true\n")
		if _, err := install("nth-labels", values, "--set", "nthLabels=false"); err != nil {
			t.Fatal(err)
		}
		upgrade := func(extra ...string) error {
			_, err := runTool(ctx, h.bin, h.env, append([]string{"upgrade", "nth-labels", chartDir, "--namespace", namespace, "--kubeconfig", c.KubeconfigPath,
				"--values", values}, extra...)...)
			return err
		}
		err := upgrade()
		for _, want := range []string{"the DaemonSet " + namespace + "/nth-labels-lifeboat-agent selects", "a selector cannot change: set nthLabels=false to keep it"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("upgrade to NTH's labels: %v, want a refusal saying %q", err, want)
			}
		}
		if err := upgrade("--set", "nthLabels=false"); err != nil {
			t.Errorf("upgrade keeping Lifeboat's labels: %v", err)
		}
	})

	t.Run("unknown key", func(t *testing.T) {
		_, err := install("nth-typo", write("typo.yaml", "enableSqsTerminationDrainig: true\nqueueURL: https://sqs.eu-west-1.amazonaws.com/123456789012/q\n"))
		if err == nil || !strings.Contains(err.Error(), "enableSqsTerminationDrainig: no such value") {
			t.Errorf("install with a misspelt key: %v, want a refusal naming enableSqsTerminationDrainig", err)
		}
	})
}
