// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The chart's FlowSchema and PriorityLevelConfiguration are rendered by default and not when
// flowControl.enabled is false.
func TestFlowControlRendered(t *testing.T) {
	h := newHelm(t)
	args := []string{"--api-versions", "flowcontrol.apiserver.k8s.io/v1/FlowSchema", "--set", "controller.enabled=true",
		"--set", "config.queueUrl=https://sqs.us-east-1.amazonaws.com/123456789012/q"}
	r := h.template(t, args...)
	if len(objectsOf[*flowcontrolv1.FlowSchema](r)) != 1 || len(objectsOf[*flowcontrolv1.PriorityLevelConfiguration](r)) != 1 {
		t.Error("no FlowSchema and PriorityLevelConfiguration by default")
	}
	r = h.template(t, append(args, "--set", "flowControl.enabled=false")...)
	if len(objectsOf[*flowcontrolv1.FlowSchema](r)) != 0 || len(objectsOf[*flowcontrolv1.PriorityLevelConfiguration](r)) != 0 {
		t.Error("flow control rendered with flowControl.enabled=false")
	}
}

// flowSchemaOf records, per request path, the FlowSchema the API server classified the
// request into (the X-Kubernetes-PF-FlowSchema-UID response header).
type flowSchemaOf struct {
	mu     sync.Mutex
	byPath map[string]string
	next   http.RoundTripper
}

func (f *flowSchemaOf) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(req)
	if err == nil {
		f.mu.Lock()
		f.byPath[req.Method+" "+req.URL.Path] = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
		f.mu.Unlock()
	}
	return resp, err
}

// TestFlowSchemaClassifiesLifeboatsRequests installs the chart into the sandbox and asks the
// API server itself how it classifies the controller's requests: node and pod requests go
// to Lifeboat's FlowSchema (and so its priority level), the leader Lease does not.
func TestFlowSchemaClassifiesLifeboatsRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sandbox cluster")
	}
	h := newHelm(t)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{}) // kwok idle: no nodes here
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := runTool(ctx, h.bin, h.env, "install", "lifeboat", chartDir, "--namespace", namespace, "--kubeconfig", c.KubeconfigPath,
		"--set", "controller.enabled=true", "--set", "config.queueUrl=https://sqs.us-east-1.amazonaws.com/123456789012/q"); err != nil {
		t.Fatal(err)
	}
	fs, err := c.Client.FlowcontrolV1().FlowSchemas().Get(ctx, "lifeboat", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart installed no FlowSchema: %v", err)
	}
	if _, err := c.Client.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, fs.Spec.PriorityLevelConfiguration.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("no PriorityLevelConfiguration %s: %v", fs.Spec.PriorityLevelConfiguration.Name, err)
	}

	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "lifeboat-controller", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := c.UserConfig("token-user")
	if err != nil {
		t.Fatal(err)
	}
	seen := &flowSchemaOf{byPath: map[string]string{}}
	controller := kubernetes.NewForConfigOrDie(&rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}, BearerToken: tr.Status.Token,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { seen.next = rt; return seen }})
	if _, err := controller.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := controller.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lifeboat-controller", Namespace: namespace}}
	if _, err := controller.CoordinationV1().Leases(namespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ours := string(fs.UID)
	for path, uid := range seen.byPath {
		lease := strings.Contains(path, "/leases")
		switch {
		case uid == "":
			t.Errorf("%s: the API server named no FlowSchema (is API Priority and Fairness off?)", path)
		case lease && uid == ours:
			t.Errorf("%s: the leader Lease went to Lifeboat's FlowSchema; it must stay outside it", path)
		case !lease && uid != ours:
			t.Errorf("%s: classified into FlowSchema %s, not Lifeboat's %s", path, uid, ours)
		}
	}
	if len(seen.byPath) != 3 {
		t.Errorf("requests seen: %v", seen.byPath)
	}
}
