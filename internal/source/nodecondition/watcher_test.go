// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

func node(provider string, conds ...corev1.NodeCondition) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{ProviderID: provider}, Status: corev1.NodeStatus{Conditions: conds}}
}

func cond(typ string, status corev1.ConditionStatus, since time.Time) corev1.NodeCondition {
	return corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status, LastTransitionTime: metav1.NewTime(since)}
}

func TestEvaluate(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	w, err := New(Options{Nodes: cache.NewSharedIndexInformer(nil, &corev1.Node{}, 0, nil), DrainTimeout: time.Minute, Now: func() time.Time { return now },
		Policies: config.RepairPolicies{{Condition: "KernelReady", Status: "False", Wait: 30 * time.Minute, Action: config.PolicyReplace},
			{Condition: "GPU", Status: "Unknown", Wait: 10 * time.Minute, Action: config.PolicyReplace}}})
	if err != nil {
		t.Fatal(err)
	}
	const provider = "aws:///us-east-1a/i-0123456789abcdef0"
	for _, tc := range []struct {
		name string
		n    *corev1.Node
		due  bool
		wait time.Duration
		id   string
	}{
		{name: "healthy", n: node(provider, cond("KernelReady", corev1.ConditionTrue, now.Add(-time.Hour)))},
		{name: "other status", n: node(provider, cond("GPU", corev1.ConditionFalse, now.Add(-time.Hour)))},
		{name: "not yet", n: node(provider, cond("KernelReady", corev1.ConditionFalse, now.Add(-20*time.Minute))), wait: 10 * time.Minute},
		{name: "soonest", n: node(provider, cond("KernelReady", corev1.ConditionFalse, now.Add(-20*time.Minute)), cond("GPU", corev1.ConditionUnknown, now.Add(-5*time.Minute))), wait: 5 * time.Minute},
		{name: "due", n: node(provider, cond("KernelReady", corev1.ConditionFalse, now.Add(-30*time.Minute))), due: true, id: "repair-i-0123456789abcdef0-kernelready"},
		{name: "second due", n: node(provider, cond("KernelReady", corev1.ConditionFalse, now), cond("GPU", corev1.ConditionUnknown, now.Add(-time.Hour))), due: true, id: "repair-i-0123456789abcdef0-gpu"},
		{name: "no providerID", n: node("", cond("KernelReady", corev1.ConditionFalse, now.Add(-time.Hour)))},
	} {
		n, due, wait := w.Evaluate(tc.n)
		if due != tc.due || wait != tc.wait || n.ID != tc.id {
			t.Errorf("%s: due %v wait %v id %q; want %v %v %q", tc.name, due, wait, n.ID, tc.due, tc.wait, tc.id)
		}
		if due && (n.Kind != notice.NodeRepair || n.Source != notice.SourceNodeCondition || !n.Deadline.Equal(now.Add(time.Minute)) || n.InstanceID != "i-0123456789abcdef0") {
			t.Errorf("%s: notice %+v", tc.name, n)
		}
	}
}

func TestAssess(t *testing.T) {
	now := time.Now()
	conds := config.RepairPolicies{{Condition: "KernelReady", Status: "False", Wait: time.Hour, Action: config.PolicyReplace}}
	sick := func() *corev1.Node { return node("", cond("KernelReady", corev1.ConditionFalse, now)) }
	well := func() *corev1.Node { return node("", cond("KernelReady", corev1.ConditionTrue, now)) }
	three := []*corev1.Node{sick(), sick(), well(), well(), well(), well(), well(), well(), well(), well()}
	four := []*corev1.Node{sick(), well(), well(), well()}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		l     Limits
		t     Tally
		cause string
	}{
		{name: "20% of 20%", nodes: three, l: Limits{MaxUnhealthyPercent: 20}},
		{name: "20% of 10%", nodes: three, l: Limits{MaxUnhealthyPercent: 10}, cause: CauseShare},
		{name: "one of four at 20% (rounded up)", nodes: four, l: Limits{MaxUnhealthyPercent: 20}},
		{name: "two of four at 20%", nodes: append([]*corev1.Node{sick()}, four...), l: Limits{MaxUnhealthyPercent: 20}, cause: CauseShare},
		{name: "one of four at 0%", nodes: four, l: Limits{}, cause: CauseShare},
		{name: "paused", nodes: three, l: Limits{MaxUnhealthyPercent: 100, Paused: true}, cause: CausePaused},
		{name: "parallel", nodes: three, l: Limits{MaxUnhealthyPercent: 100, MaxParallel: 1}, t: Tally{Pending: 1}, cause: CauseMaxParallel},
		{name: "parallel off", nodes: three, l: Limits{MaxUnhealthyPercent: 100}, t: Tally{Pending: 9}},
		{name: "per hour", nodes: three, l: Limits{MaxUnhealthyPercent: 100, MaxPerHour: 3}, t: Tally{Started: 3}, cause: CauseMaxPerHour},
		{name: "per hour not reached", nodes: three, l: Limits{MaxUnhealthyPercent: 100, MaxPerHour: 3}, t: Tally{Started: 2}},
		{name: "per hour off", nodes: three, l: Limits{MaxUnhealthyPercent: 100}, t: Tally{Started: 50}},
		{name: "no nodes", l: Limits{}},
	} {
		b := Assess(tc.nodes, conds, tc.l, tc.t)
		if b.Cause != tc.cause || b.Open != (tc.cause != "") || b.Open && b.Reason == "" {
			t.Errorf("%s: %+v, want cause %q", tc.name, b, tc.cause)
		}
		if h := b.Hold("any"); h.Cause != tc.cause || h.Reason != b.Reason {
			t.Errorf("%s: hold %+v, want the cluster's breaker %q", tc.name, h, tc.cause)
		}
	}
	if b := Assess(three, conds, Limits{MaxUnhealthyPercent: 20}, Tally{}); b.Unhealthy != 2 || b.Nodes != 10 {
		t.Errorf("counted %+v", b)
	}
}

// The share is counted per group as well as for the cluster, both rounded up: one sick node
// of a group of three may be repaired at 20 %, while a group that is all unhealthy is held
// although the cluster's share is low. A node of no group is held by the cluster's breaker
// only.
func TestBreakerPerGroup(t *testing.T) {
	now := time.Now()
	conds := config.RepairPolicies{{Condition: "KernelReady", Status: "False", Wait: time.Hour, Action: config.PolicyReplace}}
	in := func(group string, status corev1.ConditionStatus) *corev1.Node {
		n := node("", cond("KernelReady", status, now))
		n.Labels = map[string]string{"group": group}
		return n
	}
	all := []*corev1.Node{in("a", corev1.ConditionFalse), in("a", corev1.ConditionTrue), in("a", corev1.ConditionTrue),
		in("b", corev1.ConditionFalse), in("b", corev1.ConditionFalse), in("", corev1.ConditionFalse)}
	for range 10 {
		all = append(all, in("c", corev1.ConditionTrue))
	}
	b := Assess(all, conds, Limits{MaxUnhealthyPercent: 20}, Tally{})
	if b.Open {
		t.Fatalf("4 of 16 at 20%% (4 allowed): the cluster's breaker is open: %+v", b)
	}
	b.CountGroups(all, conds, func(n *corev1.Node) string { return n.Labels["group"] })
	if len(b.Groups) != 1 || b.Groups[0] != (Group{Name: "b", Nodes: 2, Unhealthy: 2}) {
		t.Errorf("open groups %+v, want b alone", b.Groups)
	}
	if h := b.Hold("a"); h.Cause != "" {
		t.Errorf("group a (1 of 3): held %+v", h)
	}
	if h := b.Hold("b"); h.Cause != CauseGroupShare || !strings.Contains(h.Reason, "2 of 2 nodes of b unhealthy, more than the 1") {
		t.Errorf("group b (2 of 2): %+v", h)
	}
	if h := b.Hold(""); h.Cause != "" {
		t.Errorf("no group: held %+v", h)
	}
	if b.MetricCause() != CauseGroupShare {
		t.Errorf("metric cause %q", b.MetricCause())
	}
}

func TestGroupOf(t *testing.T) {
	g := &groups{now: time.Now, known: map[string]knownGroup{"i-1": {name: "workers", at: time.Now()}}}
	for _, tc := range []struct {
		provider string
		labels   map[string]string
		want     string
	}{
		{"aws:///us-east-1a/i-1", map[string]string{LabelEKSNodegroup: "ng"}, "Auto Scaling group workers"},
		{"aws:///us-east-1a/i-2", map[string]string{LabelKarpenterNodePool: "default", LabelEKSNodegroup: "ng"}, LabelEKSNodegroup + "=ng"},
		{"aws:///us-east-1a/i-2", map[string]string{LabelKarpenterNodePool: "default"}, LabelKarpenterNodePool + "=default"},
		{"aws:///us-east-1a/i-2", nil, ""},
	} {
		n := node(tc.provider)
		n.Labels = tc.labels
		if got := g.of(n); got != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.provider, tc.labels, got, tc.want)
		}
	}
}

type panicCount struct{ sites []string }

func (p *panicCount) PanicRecovered(site string) { p.sites = append(p.sites, site) }

// panicsOnce panics the first time a repair starts: a node's conditions are input.
type panicsOnce struct {
	quiet
	panicked bool
}

func (p *panicsOnce) Started(*corev1.Node, notice.Notice) {
	if !p.panicked {
		p.panicked = true
		panic("a report that panics")
	}
}

// A panic while looking at one node is recovered and counted, and the watcher goes on with the
// next; what the watcher keeps of a node is dropped when the Node is deleted.
func TestWatcherRecoversAndForgets(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sick := func(name, instance string) *corev1.Node {
			n := node("aws:///us-east-1a/"+instance, cond("KernelReady", corev1.ConditionFalse, time.Now().Add(-time.Hour)))
			n.Name = name
			return n
		}
		client := fake.NewClientset(sick("a", "i-0000000000000000a"))
		factory := informers.NewSharedInformerFactory(client, 0)
		nodes := factory.Core().V1().Nodes().Informer()
		counted := &panicCount{}
		w, err := New(Options{Nodes: nodes, DrainTimeout: time.Minute, Report: &panicsOnce{}, Panics: counted, Limits: Limits{MaxUnhealthyPercent: 100},
			Policies: config.RepairPolicies{{Condition: "KernelReady", Status: "False", Wait: time.Minute, Action: config.PolicyReplace}}})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var took []string
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- w.Run(runCtx, func(_ context.Context, ns []notice.Notice) []Fate {
				mu.Lock()
				defer mu.Unlock()
				for _, n := range ns {
					took = append(took, n.Node)
				}
				return []Fate{Started}
			})
		}()
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
		tookNode := func(name string) bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(took, name)
		}
		synctest.Wait()
		if !tookNode("a") {
			t.Fatal("node a not taken once everything waits")
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, sick("b", "i-0000000000000000b"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !tookNode("b") {
			t.Fatal("node b not taken once everything waits")
		}
		if err := client.CoreV1().Nodes().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the informer and the watcher have seen the deletion
		if _, ok, _ := nodes.GetStore().GetByKey("a"); ok {
			t.Fatal("the deleted node is still in the informer once everything waits")
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(counted.sites, []string{"node_repair"}) {
			t.Errorf("panics counted %v, want one at node_repair", counted.sites)
		}
		if _, ok := w.started["a"]; ok {
			t.Error("the deleted node is still remembered as started")
		}
		if _, ok := w.started["b"]; !ok {
			t.Error("node b's repair is not remembered as started")
		}
	})
}

// describer answers from a map; an id in failing fails.
type describer struct {
	mu      sync.Mutex
	tags    map[string]map[string]string
	failing string
	asked   []string
}

func (d *describer) Describe(_ context.Context, id string) (cloud.Instance, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, id)
	if id == d.failing {
		return cloud.Instance{}, false, errors.New("EC2 is down")
	}
	tags, ok := d.tags[id]
	return cloud.Instance{ID: id, Tags: tags}, ok, nil
}

// Groups are learned from EC2's tags, once per instance while remembered; an instance EC2
// could not be asked about, or that is in no group, falls back to its labels.
func TestGroupsLearn(t *testing.T) {
	d := &describer{tags: map[string]map[string]string{"i-1": {tagAutoScalingGroup: "workers"}, "i-2": {}}, failing: "i-3"}
	now := time.Now()
	g := &groups{describe: d, now: func() time.Time { return now }, known: map[string]knownGroup{}}
	mk := func(id string) *corev1.Node {
		n := node("aws:///us-east-1a/" + id)
		n.Labels = map[string]string{LabelEKSNodegroup: "ng-" + id}
		return n
	}
	all := []*corev1.Node{mk("i-1"), mk("i-2"), mk("i-3"), node("")}
	g.learn(context.Background(), all)
	want := []string{"Auto Scaling group workers", LabelEKSNodegroup + "=ng-i-2", LabelEKSNodegroup + "=ng-i-3", ""}
	for i, n := range all {
		if got := g.of(n); got != want[i] {
			t.Errorf("node %d: group %q, want %q", i, got, want[i])
		}
	}
	g.learn(context.Background(), all)
	if slices.Sort(d.asked); !slices.Equal(d.asked, []string{"i-1", "i-2", "i-3", "i-3"}) {
		t.Errorf("asked %v: the known instances again, or not the failed one", d.asked)
	}
	now = now.Add(groupTTL)
	g.learn(context.Background(), all)
	if len(d.asked) != 7 {
		t.Errorf("asked %v: the groups are not learned again once past their time", d.asked)
	}
}

// Policies match a condition by type, status and reason; the first that matches decides, a
// policy whose action is none repairs nothing and counts nothing unhealthy, and due conditions
// come in the policies' order.
func TestEvaluatePolicies(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	policies := config.RepairPolicies{}
	if err := fromYAML(&policies, `
- {condition: KernelReady, status: "False", reason: "Oops.*", wait: 5m, action: replace}
- {condition: KernelReady, status: "False", reason: "Conntrack.*", action: none}
- {condition: KernelReady, status: "False", wait: 30m, action: replace}
- {condition: AcceleratedHardwareReady, status: "False", wait: 10m, action: replace}
- {condition: DiskPressure, status: "True", action: none}
`); err != nil {
		t.Fatal(err)
	}
	w, err := New(Options{Nodes: cache.NewSharedIndexInformer(nil, &corev1.Node{}, 0, nil), DrainTimeout: time.Minute, Now: func() time.Time { return now }, Policies: policies})
	if err != nil {
		t.Fatal(err)
	}
	const provider = "aws:///us-east-1a/i-0123456789abcdef0"
	kernel := func(reason string, since time.Duration) corev1.NodeCondition {
		return withReason(cond("KernelReady", corev1.ConditionFalse, now.Add(-since)), reason)
	}
	for _, tc := range []struct {
		name      string
		conds     []corev1.NodeCondition
		due       bool
		wait      time.Duration
		id        string
		unhealthy bool
	}{
		{name: "reason with a short wait", conds: []corev1.NodeCondition{kernel("OopsInModule", 10*time.Minute)}, due: true, id: "repair-i-0123456789abcdef0-kernelready", unhealthy: true},
		{name: "reason never repaired", conds: []corev1.NodeCondition{kernel("ConntrackExceeded", 2*time.Hour)}},
		{name: "another reason", conds: []corev1.NodeCondition{kernel("Other", 20*time.Minute)}, wait: 10 * time.Minute, unhealthy: true},
		{name: "the whole reason must match", conds: []corev1.NodeCondition{kernel("NotOops", 20*time.Minute)}, wait: 10 * time.Minute, unhealthy: true},
		{name: "disk pressure", conds: []corev1.NodeCondition{cond("DiskPressure", corev1.ConditionTrue, now.Add(-2*time.Hour))}},
		{name: "policies' order", conds: []corev1.NodeCondition{cond("AcceleratedHardwareReady", corev1.ConditionFalse, now.Add(-11*time.Minute)), kernel("Other", 40*time.Minute)},
			due: true, id: "repair-i-0123456789abcdef0-kernelready", unhealthy: true},
	} {
		n := node(provider, tc.conds...)
		got, due, wait := w.Evaluate(n)
		if due != tc.due || wait != tc.wait || got.ID != tc.id {
			t.Errorf("%s: due %v wait %v id %q; want %v %v %q", tc.name, due, wait, got.ID, tc.due, tc.wait, tc.id)
		}
		if due && got.Action != config.PolicyReplace {
			t.Errorf("%s: action %q", tc.name, got.Action)
		}
		if u := Unhealthy(n, policies); u != tc.unhealthy {
			t.Errorf("%s: unhealthy %v, want %v", tc.name, u, tc.unhealthy)
		}
	}
}

// fromYAML parses policies as NODE_REPAIR_POLICIES does.
func fromYAML(p *config.RepairPolicies, raw string) error {
	l, err := config.Load(nil, func(k string) (string, bool) {
		if k == "NODE_REPAIR_POLICIES" {
			return raw, true
		}
		return "", false
	})
	if err != nil {
		return err
	}
	*p = l.Config.NodeRepairPolicies
	return nil
}

func TestSelected(t *testing.T) {
	n := node("")
	n.Labels = map[string]string{"team": "ml"}
	sel, err := labels.Parse("team in (ml, data)")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := labels.Parse("team=web")
	if !Selected(n, nil) || !Selected(n, sel) || Selected(n, other) {
		t.Error("a nil selector selects every node, a selector the nodes it matches only")
	}
}

// Starts are counted from the nodes' repair memories within the hour before now; one later
// than now (past the clocks' skew), or one of a memory that does not read, is not: a node's
// credential writes its own annotations.
func TestRecordedStarts(t *testing.T) {
	now := time.Now()
	withStart := func(name, raw string) *corev1.Node {
		n := node("")
		n.Name, n.Annotations = name, map[string]string{record.AnnotationRepair: raw}
		return n
	}
	at := func(d time.Duration) string { return `{"started":"` + now.Add(d).UTC().Format(time.RFC3339) + `"}` }
	got := RecordedStarts([]*corev1.Node{
		withStart("recent", at(-10*time.Minute)),
		withStart("skewed", at(30*time.Second)),
		withStart("long-ago", at(-2*time.Hour)),
		withStart("future", at(24*time.Hour)),
		withStart("unreadable", `{"started":`),
	}, now)
	if _, ok := got["recent"]; !ok || len(got) != 2 {
		t.Errorf("counted %v, want recent and skewed only", got)
	}
	if _, ok := got["skewed"]; !ok {
		t.Errorf("a start within the clocks' skew was not counted: %v", got)
	}
}

// unreadableReports records the nodes whose repair memory was said unreadable.
type unreadableReports struct {
	quiet
	mu   sync.Mutex
	said []string
}

func (r *unreadableReports) Unreadable(n *corev1.Node, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.said = append(r.said, n.Name+": "+err.Error())
}

func (r *unreadableReports) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.said) }

// A repair memory that does not read is said once per content: again when its content
// changes, not on each update of the node, and not once it reads.
func TestWatcherSaysAnUnreadableMemory(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n := node("aws:///us-east-1a/i-0000000000000000a", cond("KernelReady", corev1.ConditionTrue, time.Now()))
		n.Annotations = map[string]string{record.AnnotationRepair: `{"started":`}
		client := fake.NewClientset(n)
		factory := informers.NewSharedInformerFactory(client, 0)
		reports := &unreadableReports{}
		w, err := New(Options{Nodes: factory.Core().V1().Nodes().Informer(), Report: reports, Limits: Limits{MaxUnhealthyPercent: 100},
			Policies: config.RepairPolicies{{Condition: "KernelReady", Status: "False", Wait: time.Minute, Action: config.PolicyReplace}}})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = w.Run(ctx, func(context.Context, []notice.Notice) []Fate { return []Fate{Started} }) }()
		factory.Start(ctx.Done())
		update := func(change func(*corev1.Node)) {
			got, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			change(got)
			if _, err := client.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		synctest.Wait()
		for _, step := range []struct {
			name   string
			change func(*corev1.Node)
			said   int
		}{
			{"an update that keeps it", func(n *corev1.Node) { n.Labels = map[string]string{"x": "y"} }, 1},
			{"another content", func(n *corev1.Node) { n.Annotations[record.AnnotationRepair] = `{"clocks":[{"type":""}]}` }, 2},
			{"a content that reads", func(n *corev1.Node) { n.Annotations[record.AnnotationRepair] = `{}` }, 2},
			{"the first content again", func(n *corev1.Node) { n.Annotations[record.AnnotationRepair] = `{"started":` }, 3},
		} {
			update(step.change)
			if got := reports.count(); got != step.said {
				t.Errorf("after %s: said %d times, want %d: %v", step.name, got, step.said, reports.said)
			}
		}
		if !strings.Contains(reports.said[0], record.AnnotationRepair) {
			t.Errorf("the report does not name the annotation: %s", reports.said[0])
		}
		cancel()
		synctest.Wait()
	})
}
