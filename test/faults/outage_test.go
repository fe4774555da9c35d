// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// maxRate bounds the requests a handler may make to a failing service, per second of the
// fault, on average: backing off means far fewer; a retry loop without backoff, hundreds.
const maxRate = 3.0

// outageLength is how long each outage lasts.
func outageLength() time.Duration { return pick(6*time.Second, 60*time.Second) }

// bounded checks the number of requests made during an outage.
func bounded(t *testing.T, what string, n int, d time.Duration) {
	t.Helper()
	if limit := 10 + int(maxRate*d.Seconds()); n > limit {
		t.Errorf("%d %s requests during the %s outage (%.1f/s), want at most %d: no backoff", n, what, d, float64(n)/d.Seconds(), limit)
	}
}

// testAWSOutages: the SQS server and the EC2 / Auto Scaling endpoint answer 500 or throttle
// while a Spot warning and a terminate hook for one node arrive. The controller must not
// crash, must back off, and must finish the work once the endpoint answers again.
func testAWSOutages(t *testing.T, w *world) {
	faults := []struct {
		name    string
		fault   fakeaws.Fault
		service string // whose requests are counted during the outage
		full    bool   // only in the full run
	}{
		{"SQS answers 500", fakeaws.Fault{Service: "sqs", Status: http.StatusInternalServerError, Code: "InternalError"}, "sqs", false},
		{"SQS throttles", fakeaws.Fault{Service: "sqs", Status: http.StatusBadRequest, Code: "ThrottlingException"}, "sqs", true},
		{"EC2 answers 500", fakeaws.Fault{Service: "ec2", Status: http.StatusInternalServerError, Code: "InternalError"}, "ec2", true},
		{"EC2 throttles", fakeaws.Fault{Service: "ec2", Status: http.StatusServiceUnavailable, Code: "RequestLimitExceeded"}, "ec2", false},
		{"Auto Scaling answers 500", fakeaws.Fault{Service: "autoscaling", Status: http.StatusInternalServerError, Code: "InternalError"}, "autoscaling", false},
		{"Auto Scaling throttles", fakeaws.Fault{Service: "autoscaling", Status: http.StatusBadRequest, Code: "Throttling"}, "autoscaling", true},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			if f.full && !fullRun() {
				t.Skip("full run only (LIFEBOAT_FAULTS_FULL=1)")
			}
			t.Parallel()
			awsOutage(t, w, f.name, f.fault, f.service)
		})
	}
}

func awsOutage(t *testing.T, w *world, name string, fault fakeaws.Fault, service string) {
	d := outageLength()
	ctx, cancel := context.WithTimeout(context.Background(), d+3*time.Minute)
	defer cancel()
	node := w.addNodes(t, 1)[0]
	pods := w.addPods(t, node, podSpec{}, podSpec{})
	qs := newQueues(t, w, "q")
	qs.addInstances(node)
	token := qs.beginTermination(node)
	user := "lifeboat-" + shortName(node)
	lb := newLifeboat(t, w.dir, user, []string{"controller"}, qs.controllerEnv("q", w.kubeconfig(t, user), "lifeboat-0",
		"NAMESPACE=kube-system")...)
	lb.Start()
	if !waitFor(ctx, 30*time.Second, func() bool { return qs.fake.CallCount("sqs", "ReceiveMessage") > 0 }) {
		t.Fatal("the controller never polled the queue")
	}

	start := time.Now()
	fault.Until = start.Add(d)
	qs.fake.SetFault(fault)
	spotBody, spotD := spot(node, start)
	hookBody, hookD := hook(node, token, start)
	bodies, about := []string{spotBody, hookBody}, []delivery{spotD, hookD}
	qs.send(t, "q", bodies, about, 1)
	var seen metricsSeen
	for time.Now().Before(fault.Until) {
		if !lb.Running() {
			t.Fatalf("lifeboat exited during the outage: %v", lb.Exits())
		}
		seen.sample(lb, "during")
		time.Sleep(500 * time.Millisecond)
	}
	during, byAction := 0, map[string]int{}
	for _, c := range qs.fake.Calls() {
		if c.Service == service && !c.At.Before(start) && c.At.Before(fault.Until) {
			during++
			byAction[c.Action]++
		}
	}
	t.Logf("%s requests during the outage by action: %v", service, byAction)
	bounded(t, service, during, d)

	for _, dl := range about {
		if !waitFor(ctx, 2*time.Minute, func() bool { return qs.unfinished(dl) == "" }) {
			t.Errorf("after the outage: %s", qs.unfinished(dl))
		}
	}
	if !qs.waitEmpty(ctx, "q", 90*time.Second) {
		t.Error("the queue was not emptied after the outage")
	}
	seen.sample(lb, "after")
	if service == "sqs" && d > 35*time.Second {
		// The health gauge is refreshed every few seconds: give it time to see the recovery.
		waitFor(ctx, 30*time.Second, func() bool {
			seen.sample(lb, "after")
			v, ok := seen.value("after", "lifeboat_source_healthy", "source", "queue")
			return ok && v == 1 && seen.lastReady("after") == http.StatusOK
		})
	}
	lb.Stop()

	lost := 0
	for _, dl := range about {
		if qs.unfinished(dl) != "" {
			lost++
		}
	}
	w.checkEvictions(t, user, pods)
	refused := qs.checkCompleted(t, token)
	qs.checkMessages(t, map[string]bool{node.Name: true})
	if exits := lb.Exits(); len(exits) > 0 {
		t.Errorf("lifeboat exited on its own: %v", exits)
	}
	survived := 1
	if t.Failed() {
		survived = 0
	}

	metricProblems := seen.controllerProblems(service, d)
	unready, probes := seen.unready("during")
	t.Run("metrics", func(t *testing.T) {
		for _, p := range metricProblems {
			t.Error(p)
		}
	})
	report(t, result{Fault: fmt.Sprintf("%s for %s", name, d), Mode: "controller", Trials: 1, Survived: survived, NoticesLost: lost,
		Run: "TestFaults/outages/aws/" + strings.ReplaceAll(name, " ", "_"),
		Notes: fmt.Sprintf("%d %s requests during the outage (%.1f/s); %d refused repeat completions; /readyz 503 in %d of %d probes during it, %d after; metrics: %s",
			during, service, float64(during)/d.Seconds(), refused, unready, probes, seen.lastReady("after"), seen.summary())})
}

// metricsSeen keeps what /metrics showed during and after an outage.
type metricsSeen struct {
	mu     sync.Mutex
	values map[string]float64 // "phase metric{labels}" -> value kept (see sample)
	ready  map[string][]int   // phase -> /readyz codes seen
}

var watched = [][]string{
	{"lifeboat_sqs_calls_total", "result", "error"},
	{"lifeboat_aws_calls_total", "result", "error"},
	{"lifeboat_imds_polls_total", "result", "error"},
	{"lifeboat_source_healthy", "source", "queue"},
	{"lifeboat_source_healthy", "source", "imds"},
}

func (m *metricsSeen) sample(lb *lifeboat, phase string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.values == nil {
		m.values, m.ready = map[string]float64{}, map[string][]int{}
	}
	code, body := httpGet(lb.MetricsPort, "/metrics")
	if code == http.StatusOK {
		for _, w := range watched {
			v, found, err := Metric(body, w[0], w[1:]...)
			key := phase + " " + w[0] + "{" + strings.Join(w[1:], "=") + "}"
			if err == nil && found {
				// Keep the highest counter seen, and the lowest health during the fault
				// but the latest after it.
				health := strings.HasSuffix(w[0], "_healthy")
				if old, ok := m.values[key]; !ok || (health && (v < old || phase != "during")) || (!health && v > old) {
					m.values[key] = v
				}
			}
		}
	}
	ready, _ := lb.Ready()
	m.ready[phase] = append(m.ready[phase], ready)
}

func (m *metricsSeen) value(phase, metric string, labels ...string) (float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[phase+" "+metric+"{"+strings.Join(labels, "=")+"}"]
	return v, ok
}

func (m *metricsSeen) summary() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for _, w := range watched {
		for _, phase := range []string{"during", "after"} {
			if v, ok := m.values[phase+" "+w[0]+"{"+strings.Join(w[1:], "=")+"}"]; ok {
				parts = append(parts, fmt.Sprintf("%s %s{%s}=%g", phase, w[0], strings.Join(w[1:], "="), v))
			}
		}
	}
	if len(parts) == 0 {
		return "none of the error or health metrics appeared"
	}
	return strings.Join(parts, ", ")
}

// controllerProblems lists what the metrics failed to show about an outage of service.
func (m *metricsSeen) controllerProblems(service string, d time.Duration) []string {
	var out []string
	metric, labels := "lifeboat_aws_calls_total", []string{"result", "error"}
	if service == "sqs" {
		metric, labels = "lifeboat_sqs_calls_total", []string{"result", "error"}
	}
	// A counter: the sample after the outage also holds the failures of its last moments,
	// which a loaded machine may count after the last sample during it.
	if v, ok := m.value("after", metric, labels...); !ok || v == 0 {
		out = append(out, fmt.Sprintf("%s{result=error} never counted the failing %s calls", metric, service))
	}
	if service == "sqs" && d > 35*time.Second {
		if v, ok := m.value("during", "lifeboat_source_healthy", "source", "queue"); !ok || v != 0 {
			out = append(out, fmt.Sprintf("lifeboat_source_healthy{source=queue} never dropped to 0 during a %s outage", d))
		}
		if v, ok := m.value("after", "lifeboat_source_healthy", "source", "queue"); !ok || v != 1 {
			out = append(out, "lifeboat_source_healthy{source=queue} is not 1 after the outage")
		}
		if unready, probes := m.unready("during"); unready == 0 {
			out = append(out, fmt.Sprintf("/readyz never answered 503 during a %s outage (%d probes)", d, probes))
		}
		if last := m.lastReady("after"); last != http.StatusOK {
			out = append(out, fmt.Sprintf("/readyz answers %d after the outage, want 200", last))
		}
	}
	return out
}

// unready counts the 503 answers of /readyz in a phase, and the probes made.
func (m *metricsSeen) unready(phase string) (unready, probes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, code := range m.ready[phase] {
		if code == http.StatusServiceUnavailable {
			unready++
		}
	}
	return unready, len(m.ready[phase])
}

// lastReady is the last /readyz answer of a phase (0 when none).
func (m *metricsSeen) lastReady(phase string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if codes := m.ready[phase]; len(codes) > 0 {
		return codes[len(codes)-1]
	}
	return 0
}

// testIMDSOutages: instance metadata answers 500, answers garbage, or answers too slowly,
// while a Spot notice appears behind the fault. The agent must not crash, must back off,
// must report itself unready after 30 s of failure and ready again after, and must handle
// the notice once metadata answers again.
func testIMDSOutages(t *testing.T, w *world) {
	faults := []struct {
		name  string
		apply func(*sandbox.IMDSProxy)
		// short is the outage in the short run (0: full run only); readiness is checked
		// when the outage is long enough to cross the 30 s threshold.
		short time.Duration
	}{
		{"IMDS answers 500", func(p *sandbox.IMDSProxy) { p.SetFault(sandbox.IMDSServerError) }, 40 * time.Second},
		{"IMDS answers garbage", func(p *sandbox.IMDSProxy) { p.SetFault(sandbox.IMDSGarbage) }, 6 * time.Second},
		{"IMDS answers after 5 s", func(p *sandbox.IMDSProxy) { p.SetDelay(5 * time.Second) }, 0},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			d := pick(f.short, 60*time.Second)
			if d == 0 {
				t.Skip("full run only (LIFEBOAT_FAULTS_FULL=1)")
			}
			t.Parallel()
			imdsOutage(t, w, f.name, f.apply, d)
		})
	}
}

func imdsOutage(t *testing.T, w *world, name string, apply func(*sandbox.IMDSProxy), d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d+3*time.Minute)
	defer cancel()
	node := w.addNodes(t, 1)[0]
	pods := w.addPods(t, node, podSpec{}, podSpec{})
	instance := episode.InstanceIDOf(node)
	m := sandboxtest.IMDS(t, sandbox.IMDSOptions{InstanceID: instance, Hostname: node.Name,
		Args: []string{"spot", "-a", "terminate", "-t", time.Now().Add(d + 2*time.Minute).UTC().Format(time.RFC3339)}})
	proxy := sandboxtest.IMDSProxy(t, m)
	const spotPath = "/latest/meta-data/spot/instance-action"
	proxy.Hide(spotPath)
	user := "lifeboat-agent-" + shortName(node)
	lb := newLifeboat(t, w.dir, user, []string{"agent"}, "KUBECONFIG="+w.kubeconfig(t, user), "NODE_NAME="+node.Name,
		"INSTANCE_METADATA_URL="+proxy.URL, "POD_NAME=lifeboat-agent", "NAMESPACE=kube-system",
		// The spot notice is two minutes past the outage: drain at once when it is seen.
		fmt.Sprintf("NODE_TERMINATION_GRACE_PERIOD=%d", int((d+3*time.Minute).Seconds())))
	lb.Start()
	if !waitFor(ctx, 30*time.Second, func() bool { code, _ := lb.Ready(); return code == http.StatusOK }) {
		t.Fatal("the agent never became ready")
	}
	time.Sleep(time.Second)
	healthyRate := float64(proxy.Requests()) // requests so far, for comparison in the log

	before, start := proxy.Requests(), time.Now()
	apply(proxy)
	proxy.Show(spotPath) // the notice is there, behind the fault
	var seen metricsSeen
	for time.Since(start) < d {
		if !lb.Running() {
			t.Fatalf("lifeboat exited during the outage: %v", lb.Exits())
		}
		seen.sample(lb, "during")
		time.Sleep(time.Second)
	}
	during := int(proxy.Requests() - before)
	proxy.SetFault(sandbox.IMDSHealthy)
	proxy.SetDelay(0)
	bounded(t, "instance-metadata", during, d)

	recovered := waitFor(ctx, 40*time.Second, func() bool { code, _ := lb.Ready(); return code == http.StatusOK })
	if !recovered {
		code, body := lb.Ready()
		t.Errorf("/readyz %d %q after the outage, want 200", code, body)
	}
	drained := w.waitDrained(ctx, node.Name, 60*time.Second)
	if !drained {
		t.Error("the notice was not handled after the outage")
	}
	// The health gauge is refreshed every 5 s: give it time to see the recovery.
	waitFor(ctx, 30*time.Second, func() bool {
		seen.sample(lb, "after")
		v, ok := seen.value("after", "lifeboat_source_healthy", "source", "imds")
		return ok && v == 1
	})
	lb.Stop()

	rec, _ := w.record(ctx, node.Name)
	if want := notice.ID(notice.SpotInterruption, instance, "terminate"); !rec.Has(want) {
		t.Errorf("record %+v lacks %s", rec, want)
	}
	w.checkEvictions(t, user, pods)
	if exits := lb.Exits(); len(exits) > 0 {
		t.Errorf("lifeboat exited on its own: %v", exits)
	}
	if v, ok := seen.value("during", "lifeboat_imds_polls_total", "result", "error"); !ok || v == 0 {
		t.Errorf("lifeboat_imds_polls_total{result=error} did not count the failed polls (%v)", v)
	}
	if v, ok := seen.value("during", "lifeboat_source_healthy", "source", "imds"); d > 35*time.Second && (!ok || v != 0) {
		t.Errorf("lifeboat_source_healthy{source=imds} never dropped to 0 during a %s outage (%v)", d, v)
	}
	if v, ok := seen.value("after", "lifeboat_source_healthy", "source", "imds"); !ok || v != 1 {
		t.Errorf("lifeboat_source_healthy{source=imds} is %v after the outage, want 1", v)
	}
	unready, probes := seen.unready("during")
	if d > 35*time.Second && unready == 0 {
		t.Errorf("/readyz never answered 503 during a %s outage (codes %v)", d, seen.ready["during"])
	}
	survived, lost := 1, 0
	if t.Failed() {
		survived = 0
	}
	if !drained {
		lost = 1
	}
	report(t, result{Fault: fmt.Sprintf("%s for %s", name, d), Mode: "agent", Trials: 1, Survived: survived, NoticesLost: lost,
		Run: "TestFaults/outages/imds/" + strings.ReplaceAll(name, " ", "_"),
		Notes: fmt.Sprintf("%d IMDS requests during the outage (%.1f/s; %.0f in the first seconds before it); /readyz 503 in %d of %d probes during it, 200 after; metrics: %s",
			during, float64(during)/d.Seconds(), healthyRate, unready, probes, seen.summary())})
}
