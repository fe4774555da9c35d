// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/kube/pacing"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// smallPriorityLevel puts user's requests on nodes into a priority level with one
// concurrency share and nothing to borrow, which refuses (429) what it cannot serve at once.
func smallPriorityLevel(t *testing.T, ctx context.Context, admin kubernetes.Interface, user string) {
	t.Helper()
	fc := admin.FlowcontrolV1()
	level := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](1),
				LendablePercent:          ptr.To[int32](0),
				BorrowingLimitPercent:    ptr.To[int32](0),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}
	if _, err := fc.PriorityLevelConfigurations().Create(ctx, level, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	schema := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "small"},
			MatchingPrecedence:         500,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: user}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"nodes"}, ClusterScope: true,
				}},
			}},
		},
	}
	if _, err := fc.FlowSchemas().Create(ctx, schema, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A burst far above what a deliberately small priority level serves: the API server refuses
// part of it (429), the budget slows down, every request still lands (client-go retries
// after Retry-After, each retry waiting for the budget again), and another client, in
// another level, is served throughout.
func TestBudgetYieldsToASmallPriorityLevel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	const user, otherUser = "lifeboat-small", "another-controller"
	smallPriorityLevel(t, ctx, c.Client, user)
	// Plain users with a role, not system:masters, whose requests skip flow control.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "node-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}}}}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "node-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-editor"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user}, {Kind: rbacv1.UserKind, Name: otherUser}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	node := nodes[0].Name

	base, err := c.UserConfig(user, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	clients, err := KubeClients(base, &config.Config{KubeAPIBurst: 200}, m)
	if err != nil {
		t.Fatal(err)
	}
	otherConfig, err := c.UserConfig(otherUser, "system:serviceaccounts", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	other := kubernetes.NewForConfigOrDie(otherConfig)

	// Another controller reads the node every 20 ms while the burst runs.
	var otherServed, otherFailed atomic.Int64
	burstDone := make(chan struct{})
	var otherWG sync.WaitGroup
	otherWG.Go(func() {
		for {
			select {
			case <-burstDone:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := other.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
				otherFailed.Add(1)
				t.Logf("another controller's read: %v", err)
			} else {
				otherServed.Add(1)
			}
		}
	})

	const patches = 600
	var failed atomic.Int64
	var wg sync.WaitGroup
	for i := range patches {
		wg.Go(func() {
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"lifeboat.dev/burst-%d":"x"}}}`, i)
			_, err := clients.Main.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				if failed.Add(1) <= 5 {
					t.Errorf("patch %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	close(burstDone)
	otherWG.Wait()

	refused := m.Value("lifeboat_kube_requests_total", "code", "429")
	halved := m.Value("lifeboat_kube_request_limit_changes_total", "reason", pacing.ReasonThrottled)
	t.Logf("%d patches: %d failed, %.0f answers 429, the bound halved %.0f times, now %.0f in flight; another controller: %d reads served, %d failed",
		patches, failed.Load(), refused, halved, clients.Budget.Limit(), otherServed.Load(), otherFailed.Load())
	if refused == 0 {
		t.Fatal("the small priority level refused nothing: the test's burst did not reach its limit, so it shows nothing")
	}
	// API Priority and Fairness's refusals are throttling, every one of them.
	if throttled := m.Value("lifeboat_kube_requests_throttled_total"); throttled != refused {
		t.Errorf("lifeboat_kube_requests_throttled_total = %.0f, want every 429 (%.0f)", throttled, refused)
	}
	if failed.Load() > 0 {
		t.Errorf("%d of %d patches failed: errors piled up instead of the budget slowing down", failed.Load(), patches)
	}
	if halved == 0 {
		t.Error("the budget never slowed down on the 429s")
	}
	if otherServed.Load() == 0 || otherFailed.Load() > 0 {
		t.Errorf("another controller's reads: %d served, %d failed; want all served", otherServed.Load(), otherFailed.Load())
	}
}

// contentTypes records, per request, what a client sent and what the server answered in.
type contentTypes struct {
	mu   sync.Mutex
	seen []string // "METHOD path: sent "type", answered in type"
	next http.RoundTripper
}

func (c *contentTypes) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		c.mu.Lock()
		c.seen = append(c.seen, fmt.Sprintf("%s %s: sent %q, answered in %s", req.Method, req.URL.Path, req.Header.Get("Content-Type"), resp.Header.Get("Content-Type")))
		c.mu.Unlock()
	}
	return resp, err
}

// TestClientsSpeakProtobuf: every client reads and writes Kubernetes objects in protobuf (a
// merge patch stays JSON), against the real API server.
func TestClientsSpeakProtobuf(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	node := nodes[0].Name
	base := rest.CopyConfig(c.AdminConfig)
	recorded := &contentTypes{}
	base.Wrap(func(rt http.RoundTripper) http.RoundTripper { recorded.next = rt; return recorded })
	clients, err := KubeClients(base, &config.Config{KubeAPIBurst: 200}, metrics.New())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clients.Main.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.Cordon.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "lifeboat-"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node}, Reason: "Test", Message: "protobuf", Type: corev1.EventTypeNormal}
	if _, err := clients.Events.CoreV1().Events("default").Create(ctx, event, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.Lease.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	recorded.mu.Lock()
	defer recorded.mu.Unlock()
	want := []string{
		`GET /api/v1/nodes/` + node + `: sent "", answered in ` + runtime.ContentTypeProtobuf,
		`PATCH /api/v1/nodes/` + node + `: sent "` + string(types.MergePatchType) + `", answered in ` + runtime.ContentTypeProtobuf,
		`POST /api/v1/namespaces/default/events: sent "` + runtime.ContentTypeProtobuf + `", answered in ` + runtime.ContentTypeProtobuf,
		`GET /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases: sent "", answered in ` + runtime.ContentTypeProtobuf,
	}
	if !slices.Equal(recorded.seen, want) {
		t.Errorf("requests and answers:\n%s\nwant:\n%s", strings.Join(recorded.seen, "\n"), strings.Join(want, "\n"))
	}
}
