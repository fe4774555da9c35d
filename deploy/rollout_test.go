// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

const (
	namespace    = "kube-system"
	controlPlane = "node-role.kubernetes.io/control-plane"
	// rolloutTimeout is generous: a rollout that can complete does so in seconds even on a
	// loaded machine, and one that deadlocks never does.
	rolloutTimeout = "3m"
)

// rollout is one workload of the chart installed, upgraded and checked in the sandbox.
type rollout struct {
	release     string
	component   string // agent or controller
	kind        string // daemonset or deployment
	replicas    int
	hostNetwork bool
	values      map[string]any
	// negativeControl first shows that the same workload with a surge-first strategy never
	// finishes its rollout (the test can see a deadlock), then that the chart's own strategy
	// gets out of it.
	negativeControl bool
}

// TestRolloutOnSingleControlPlaneNode is invariant 3 of docs/architecture.md: on a cluster whose only
// eligible node is a tainted control-plane node, the chart installs and every upgrade (a new
// image tag, then a configuration change) completes its rollout, with and without host
// networking, for the controller Deployment and the agent DaemonSet.
func TestRolloutOnSingleControlPlaneNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sandbox cluster")
	}
	h := newHelm(t)
	tools := sandboxtest.Tools(t)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{ControllerManager: true, Scheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{
		Index:  1,
		Labels: map[string]string{controlPlane: ""},
		Taints: []corev1.Taint{{Key: controlPlane, Effect: corev1.TaintEffectNoSchedule}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := &sandboxEnv{
		helm: h, kubectl: tools.Path("kubectl"), kubeconfig: c.KubeconfigPath,
		client: c.Client, node: nodes[0].Name, dir: t.TempDir(),
	}

	tolerateControlPlane := []map[string]any{{"key": controlPlane, "operator": "Exists", "effect": "NoSchedule"}}
	rollouts := []rollout{
		{
			release: "ctl", component: "controller", kind: "deployment", replicas: 2,
			// Two replicas on one node: the preferred anti-affinity must not block them.
			values: map[string]any{
				"agent":      map[string]any{"enabled": false},
				"controller": map[string]any{"enabled": true, "replicas": 2, "tolerations": tolerateControlPlane},
				"config":     map[string]any{"enableProbesServer": true, "enablePrometheusServer": true},
			},
		},
		{
			release: "ctl-hostnet", component: "controller", kind: "deployment", replicas: 1, hostNetwork: true, negativeControl: true,
			values: map[string]any{
				"agent":      map[string]any{"enabled": false},
				"controller": map[string]any{"enabled": true, "hostNetwork": true, "tolerations": tolerateControlPlane},
				"config": map[string]any{"enableProbesServer": true, "probesServerPort": 18080,
					"enablePrometheusServer": true, "prometheusServerPort": 19092},
			},
		},
		{
			// The agent's defaults: host networking, every taint tolerated.
			release: "agent", component: "agent", kind: "daemonset", replicas: 1, hostNetwork: true,
			values: map[string]any{
				"config": map[string]any{"enableProbesServer": true, "probesServerPort": 28080,
					"enablePrometheusServer": true, "prometheusServerPort": 29092},
			},
		},
	}
	t.Run("group", func(t *testing.T) {
		for _, r := range rollouts {
			t.Run(r.release, func(t *testing.T) {
				t.Parallel()
				env.run(ctx, t, r)
			})
		}
	})
}

// sandboxEnv is the cluster the rollouts share, and the tools that drive it.
type sandboxEnv struct {
	helm       helm
	kubectl    string
	kubeconfig string
	client     kubernetes.Interface
	node       string
	dir        string
}

func (e *sandboxEnv) run(ctx context.Context, t *testing.T, r rollout) {
	valuesFile := filepath.Join(e.dir, r.release+".json")
	b, err := json.Marshal(r.values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(valuesFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	name := r.release + "-lifeboat-" + r.component
	selector := "app.kubernetes.io/instance=" + r.release + ",app.kubernetes.io/component=" + r.component
	upgrade := func(set ...string) string {
		t.Helper()
		args := []string{"upgrade", "--install", r.release, chartDir, "--namespace", namespace,
			"--kubeconfig", e.kubeconfig, "--values", valuesFile}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out, err := runTool(ctx, e.helm.bin, e.helm.env, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	steps := []struct {
		what     string
		set      []string
		tag      string
		logLevel string
	}{
		{"install", nil, "0.1.0", "info"},
		{"new image tag", []string{"image.tag=0.1.1"}, "0.1.1", "info"},
		{"configuration change", []string{"image.tag=0.1.1", "config.logLevel=debug"}, "0.1.1", "debug"},
	}
	for i, s := range steps {
		out := upgrade(s.set...)
		// The release notes render and tell how to follow the rollout.
		if want := "rollout status " + r.kind + "/" + name; i == 0 && !strings.Contains(out, want) {
			t.Errorf("helm install output does not say %q:\n%s", want, out)
		}
		if err := e.rolloutStatus(ctx, r.kind, name, rolloutTimeout); err != nil {
			t.Fatalf("%s: rollout did not complete: %v", s.what, err)
		}
		e.waitPods(ctx, t, s.what, selector, r.replicas, "ghcr.io/lifeboat-dev/lifeboat:"+s.tag, s.logLevel, r.hostNetwork)
	}
	e.checkPermissions(ctx, t, r.release+"-lifeboat-"+r.component, r.component == "controller")

	if !r.negativeControl {
		return
	}
	// The strategy the chart avoids: start the new pod first. Its host ports are held by the
	// running pod, so it stays Pending and the rollout never completes.
	if _, err := runTool(ctx, e.kubectl, nil, "--kubeconfig", e.kubeconfig, "-n", namespace, "patch", "deployment", name,
		"--type=merge", "-p", `{"spec":{"strategy":{"rollingUpdate":{"maxSurge":1,"maxUnavailable":0}}}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := runTool(ctx, e.kubectl, nil, "--kubeconfig", e.kubeconfig, "-n", namespace, "set", "image",
		"deployment/"+name, "lifeboat=ghcr.io/lifeboat-dev/lifeboat:surge"); err != nil {
		t.Fatal(err)
	}
	e.waitPendingOnHostPorts(ctx, t, selector, "ghcr.io/lifeboat-dev/lifeboat:surge")
	if err := e.rolloutStatus(ctx, r.kind, name, "10s"); err == nil {
		t.Fatal("negative control: a surge-first rollout with host ports completed on a single node; the test cannot detect the deadlock it guards against")
	}
	// The chart's strategy (old pod first) gets the stuck Deployment moving again.
	upgrade("image.tag=0.1.2", "config.logLevel=debug")
	if err := e.rolloutStatus(ctx, r.kind, name, rolloutTimeout); err != nil {
		t.Fatalf("upgrade after the stuck rollout did not complete: %v", err)
	}
	e.waitPods(ctx, t, "upgrade after the stuck rollout", selector, r.replicas, "ghcr.io/lifeboat-dev/lifeboat:0.1.2", "debug", r.hostNetwork)
}

func (e *sandboxEnv) rolloutStatus(ctx context.Context, kind, name, timeout string) error {
	_, err := runTool(ctx, e.kubectl, nil, "--kubeconfig", e.kubeconfig, "-n", namespace,
		"rollout", "status", kind+"/"+name, "--timeout="+timeout)
	return err
}

// waitPods waits until exactly want live pods run the expected image and LOG_LEVEL on the
// node, Ready, with host ports exactly when host networking is on (every rollout here
// declares ports, so the scheduler's host-port check applies).
func (e *sandboxEnv) waitPods(ctx context.Context, t *testing.T, step, selector string, want int, image, logLevel string, hostNetwork bool) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := e.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var live []string
		ok := true
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			c := p.Spec.Containers[0]
			level := ""
			for _, v := range c.Env {
				if v.Name == "LOG_LEVEL" {
					level = v.Value
				}
			}
			hostPorts := len(c.Ports) > 0
			for _, port := range c.Ports {
				hostPorts = hostPorts && port.HostPort == port.ContainerPort
			}
			live = append(live, fmt.Sprintf("%s(image %s, LOG_LEVEL %s, node %q, ready %v, host ports %v)",
				p.Name, c.Image, level, p.Spec.NodeName, podReady(&p), hostPorts))
			if c.Image != image || level != logLevel || p.Spec.NodeName != e.node || !podReady(&p) || hostPorts != hostNetwork {
				ok = false
			}
		}
		last = strings.Join(live, ", ")
		return ok && len(live) == want, nil
	})
	if err != nil {
		t.Fatalf("%s: want %d Ready pods with %s and LOG_LEVEL=%s on %s; have %s", step, want, image, logLevel, e.node, last)
	}
}

// waitPendingOnHostPorts waits until the pod with image is unschedulable for want of free
// host ports, so the negative control fails for the right reason.
func (e *sandboxEnv) waitPendingOnHostPorts(ctx context.Context, t *testing.T, selector, image string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := e.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != image {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled {
					last = fmt.Sprintf("%s: %s %s %s", p.Name, cond.Status, cond.Reason, cond.Message)
					if cond.Status == corev1.ConditionFalse && strings.Contains(cond.Message, "free ports") {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("negative control: the surge pod never became unschedulable for want of host ports (last: %s)", last)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkPermissions asks the API server's authorizer what the installed RBAC lets the
// component's ServiceAccount do: exactly the documented permissions, leases only for the
// controller and only in its namespace.
func (e *sandboxEnv) checkPermissions(ctx context.Context, t *testing.T, serviceAccount string, controller bool) {
	t.Helper()
	type check struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}
	var checks []check
	cluster := deploy.AgentPermissions
	if controller {
		cluster = deploy.ControllerPermissions
	} else {
		checks = append(checks, check{authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "list"}, false},
			check{authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "watch"}, false})
	}
	for _, a := range cluster {
		checks = append(checks, check{a, true}) // cluster-wide: Namespace "" is every namespace
	}
	for _, a := range deploy.LeasePermissions {
		if a.Name != "" {
			a.Name = serviceAccount // the chart names the release's Lease as its controller
		}
		a.Namespace = namespace
		checks = append(checks, check{a, controller})
		a.Namespace = "default"
		checks = append(checks, check{a, false})
	}
	for _, a := range []authorizationv1.ResourceAttributes{
		{Resource: "nodes", Verb: "delete"},
		{Resource: "nodes", Verb: "update"},
		{Resource: "pods", Verb: "create"},
		{Resource: "secrets", Verb: "get"},
		{Group: "apps", Resource: "daemonsets", Verb: "get"},
		{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: namespace, Name: "someone-else"},
	} {
		checks = append(checks, check{a, false})
	}
	user := "system:serviceaccount:" + namespace + ":" + serviceAccount
	for _, c := range checks {
		attrs := c.attrs
		review, err := e.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
				ResourceAttributes: &attrs,
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != c.want {
			t.Errorf("%s may %s %s/%s in namespace %q (name %q): %v, want %v", serviceAccount, attrs.Verb, attrs.Resource, attrs.Subresource,
				attrs.Namespace, attrs.Name, review.Status.Allowed, c.want)
		}
	}
}
