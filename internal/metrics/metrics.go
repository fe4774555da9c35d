// SPDX-License-Identifier: Apache-2.0

// Package metrics holds Lifeboat's Prometheus metrics on a registry of its own (no global
// state, so tests and several instances in one process do not collide). Labels are bounded:
// never a node name, instance id or notice id. Names and label values follow Prometheus's
// conventions (base units, _total counters, _ratio ratios, snake_case values; a test runs
// promlint over the registry). Every method is safe on a nil *Metrics, which counts nothing,
// so callers need no checks.
package metrics

import (
	"errors"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/version"
)

// Results used as label values.
const (
	ResultOK       = "ok"
	ResultError    = "error"
	ResultDryRun   = "dry_run"
	ResultSkipped  = "skipped"   // nothing to do (already done, not wanted)
	ResultNotFound = "not_found" // a lifecycle action that is already over
	ResultRefused  = "refused"   // not made: the instance or group is not the node's own
	ResultGivenUp  = "given_up"  // a lifecycle action left to time out after a failure retrying cannot fix
	ResultDenied   = "denied"    // refused by AWS for want of an IAM permission
)

// Events of a drain's ownership counted by lifeboat_drain_claims_total.
const (
	ClaimClaimed = "claimed"
	ClaimRenewed = "renewed"
	ClaimWaited  = "waited"
	ClaimLost    = "lost"
)

// Results of eviction requests, counted by lifeboat_evictions_total.
const (
	EvictionEvicted = "evicted" // the pod's eviction was accepted
	EvictionForced  = "forced"  // deleted past its disruption budget near the deadline
	EvictionFailed  = "failed"  // the drain gave up on the pod
	EvictionRefused = "refused" // a request a disruption budget refused; retried
	EvictionRetried = "retried" // a request throttled or met by a transient error; retried
)

// Actions counted by lifeboat_actions_total.
const (
	ActionCordon            = "cordon" // taint, label and cordon in one write
	ActionDrain             = "drain"
	ActionUncordon          = "uncordon"
	ActionLifecycleComplete = "lifecycle_complete"
	ActionHeartbeat         = "lifecycle_heartbeat"
	ActionWebhook           = "webhook"
)

// Metrics are the collectors Lifeboat updates.
type Metrics struct {
	Registry *prometheus.Registry

	serverRefused *prometheus.CounterVec
	// instanceStatus: the controller's DescribeInstanceStatus passes (instancestatus.go).
	instanceStatus *instanceStatusMetrics
	// nodeRepair: the controller's node repairs and their breaker (noderepair.go).
	nodeRepair *nodeRepairMetrics

	panics   *prometheus.CounterVec
	retained *prometheus.CounterVec
	// eventsDropped: Kubernetes Events not written (events.go).
	eventsDropped *prometheus.CounterVec
	// ignoredMessages: queue messages recognised with nothing to act on (ignored.go).
	ignoredMessages *prometheus.CounterVec

	imdsPolls     *prometheus.CounterVec
	notices       *prometheus.CounterVec
	actions       *prometheus.CounterVec
	drainSeconds  *prometheus.HistogramVec
	evictions     *prometheus.CounterVec
	queueMessages *prometheus.CounterVec
	queueLag      prometheus.Histogram
	sqsCalls      *prometheus.CounterVec
	awsCalls      *prometheus.CounterVec
	awsDenied     *prometheus.CounterVec
	setupProblems *prometheus.GaugeVec
	leader        *prometheus.GaugeVec // no labels: a vector only so that it has no series until set
	sourceHealthy *prometheus.GaugeVec
	configWarn    *prometheus.GaugeVec
	noticeWarn    *prometheus.CounterVec
	drainClaims   *prometheus.CounterVec
	detachWait    *prometheus.HistogramVec
	podsLeft      *prometheus.CounterVec
	blockedPods   *prometheus.GaugeVec
	drainShare    prometheus.Histogram
	kubeRequests  *prometheus.CounterVec
	kubeThrottled *prometheus.CounterVec
	kubeLatency   *prometheus.HistogramVec
	episodes      *episodeCollector
	budget        *budgetCollector
	budgetChanges *prometheus.CounterVec
	checkFindings *prometheus.GaugeVec
	checkRun      *prometheus.GaugeVec
	refusedCalls  *prometheus.CounterVec
	claims        *prometheus.CounterVec
	untagged      prometheus.Counter
	badRecords    prometheus.Counter
	leftToNewer   *prometheus.CounterVec
	latency       *prometheus.HistogramVec
}

// New registers Lifeboat's metrics, plus the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		Registry:      prometheus.NewRegistry(),
		serverRefused: newServerRefused(),
		imdsPolls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_imds_polls_total", Help: "Instance-metadata polls by path and result (ok, error).",
		}, []string{"path", "result"}),
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_notices_total", Help: "Notices received, by kind (spot_interruption, asg_termination, ...) and source (imds, queue); repeats included.",
		}, []string{"kind", "source"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_actions_total",
			Help: "Actions taken, by action (cordon, drain, uncordon, lifecycle_complete, lifecycle_heartbeat, webhook, mark_unhealthy, terminate_instance, reboot_instance) and result (ok, error, dry_run, skipped, not_found, refused, given_up: a lifecycle action left to time out after a permanent failure).",
		}, []string{"action", "result"}),
		drainSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lifeboat_drain_duration_seconds", Help: "Time from the start of a drain until its pods were gone (result ok) or it gave up (error).",
			Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800},
		}, []string{"result"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_evictions_total",
			Help: "Evictions by result: pods evicted, forced (deleted past their PodDisruptionBudget near the deadline) and failed; requests refused (by a PodDisruptionBudget) and retried (throttled, or a transient error), each retried.",
		}, []string{"result"}),
		queueMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_queue_messages_total",
			Help: "Queue messages handled, by outcome: done, retry, unreadable, ignored, not_owned, foreign_account (from an AWS account the queue does not accept), launching (a launch hook whose node is not Ready yet).",
		}, []string{"outcome"}),
		queueLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lifeboat_queue_lag_seconds", Help: "Time from a message being sent to the queue to its first handling.",
			Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 30, 60, 300},
		}),
		sqsCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_sqs_calls_total", Help: "SQS calls by event (receive, delete, extend, retry) and result (ok, error).",
		}, []string{"event", "result"}),
		awsCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_aws_calls_total", Help: "EC2, Auto Scaling, Elastic Load Balancing and EKS calls by operation and result (ok, error, not_found, denied: refused for want of an IAM permission).",
		}, []string{"operation", "result"}),
		awsDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_aws_permission_denied_total", Help: "AWS calls refused for want of permission (AccessDenied, UnauthorizedOperation, ...), by operation and the IAM action to grant. The notice a refused call blocks is kept and retried.",
		}, []string{"operation", "iam_action"}),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifeboat_leader", Help: "Controller mode: 1 while this replica holds the leader Lease, 0 while it stands by. Agents elect no leader and have no such series.",
		}, nil),
		sourceHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifeboat_source_healthy", Help: "1 while the notice source (imds, queue) answers; 0 after a sustained failure.",
		}, []string{"source"}),
		setupProblems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifeboat_aws_setup_problems", Help: "Controller: what the last check of the AWS set-up that feeds the queue found wrong, by check (rules: a notice kind no enabled EventBridge rule sends to the queue; queue_policy: EventBridge may not send to the queue; hooks: a group of this cluster's nodes whose terminations do not reach the queue, where hooks are in use; permission: the set-up could not be read). Checked at start and every hour.",
		}, []string{"check"}),
		configWarn: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifeboat_config_warning", Help: "1 for each configuration warning found at start (e.g. cluster_name_unset).",
		}, []string{"warning"}),
		noticeWarn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_notice_warnings_total",
			Help: "Details of a notice or message that could not be read, while the rest was still acted on, by problem " +
				"(start_time_unreadable: cordoned, not drained; event_code_unknown: acted on as a take-down; entity_not_instance, event_state_unknown, event_unreadable, lifecycle_state_unknown: that part skipped).",
		}, []string{"problem"}),
		drainClaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_drain_claims_total",
			Help: "Writes and waits for the ownership of a node's drain, by event: claimed (the drain is this process's), renewed (while it runs), " +
				"waited (another Lifeboat drains the node), lost (the claim was taken over or lapsed; the drain stopped).",
		}, []string{"event"}),
		detachWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lifeboat_handback_wait_seconds",
			Help: "Waits between a drained node and the hand-back of its instance, by wait (volumes, targets) and outcome " +
				"(released: nothing held any more; cut: the deadline came first; skipped: it could not be checked).",
			Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
		}, []string{"wait", "outcome"}),
		podsLeft: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_drain_pods_left_total",
			Help: "Pods a drain left on its node, by reason: do_not_disrupt (marked not to disrupt, under a notice that is no reclaim), " +
				"tolerates_taint, local_data (emptyDir with DELETE_LOCAL_DATA=false), daemonset, mirror, own_pod, finished, terminating.",
		}, []string{"reason"}),
		blockedPods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifeboat_drain_blocked_pods",
			Help: "Pods whose eviction is being refused right now, by reason: disruption_budget (a PodDisruptionBudget allows no disruption), several_disruption_budgets (more than one selects the pod).",
		}, []string{"reason"}),
		drainShare: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lifeboat_drain_deadline_used_ratio",
			Help:    "How much of the time it had a finished drain used: its duration over the time from its start to the deadline (1 = it ended at the deadline).",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.25},
		}),
		kubeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_kube_requests_total",
			Help: "Kubernetes API requests by client (main; cordon: the controller's cordons; events: Kubernetes Events; lease: its leader Lease), verb, resource and HTTP status code (error: no answer). " +
				"A 429 is either throttling (lifeboat_kube_requests_throttled_total) or, on pods/eviction, a PodDisruptionBudget's refusal (lifeboat_evictions_total{result=\"refused\"}).",
		}, []string{"client", "verb", "resource", "code"}),
		kubeThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_kube_requests_throttled_total",
			Help: "Kubernetes API requests the API server refused with 429 to shed load (API Priority and Fairness, or its in-flight limit), by client, verb and resource; a PodDisruptionBudget's refusal of an eviction is not counted here.",
		}, []string{"client", "verb", "resource"}),
		kubeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lifeboat_kube_request_duration_seconds", Help: "Kubernetes API request latency by verb (watches excluded).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"verb"}),
		episodes: newEpisodeCollector(),
		budget:   newBudgetCollector(),
		budgetChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_kube_request_limit_changes_total",
			Help: "Changes of the shared Kubernetes request budget's bound on requests in flight by reason: throttled (a 429 or 503: halved), queueing (the answers' time beyond an idle server's showed more requests queued at the server than a quarter of the bound: lowered), demand (the bound held requests back and fewer than an eighth of it queued at the server: raised).",
		}, []string{"reason"}),
		checkFindings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifeboat_readiness_findings",
			Help: "Controller with READINESS_REPORT_INTERVAL: workloads that could not leave a node within a Spot warning, by namespace and reason (as `lifeboat check` names it, in snake_case), as the last periodic check found.",
		}, []string{"namespace", "reason"}),
		checkRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifeboat_readiness_last_run_timestamp_seconds", Help: "When the periodic readiness check last ran, by result (ok, error).",
		}, []string{"result"}),
		refusedCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_instance_calls_refused_total",
			Help: "AWS calls on an instance refused before they were made, by call (CompleteLifecycleAction, RecordLifecycleActionHeartbeat): the node's record named an instance the Node does not name, or a group Auto Scaling does not put it in.",
		}, []string{"call"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_instance_claims_refused_total",
			Help: "Nodes whose spec.providerID names an instance that is not the node, by what said so (ec2: EC2 describes the instance as another node; instance_metadata: the agent's own instance is another) and by the path that looked (queue, instance_metadata, status_poll, node_condition, dead_instance, node_cleanup, retained_sweep, capacity_block). Nothing is done on such a node for that instance or for a reason read from it; a notice is handled on the node EC2 describes.",
		}, []string{"check", "path"}),
		untagged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lifeboat_notices_untagged_total",
			Help: "Notices for this cluster's nodes (EC2 describes the instance as the node) not acted on because the instance lacks the managed tag (CHECK_TAG_BEFORE_DRAINING) or this cluster's tag (CLUSTER_NAME): a wiring problem, counted once per notice an hour. Other clusters' instances are not counted here.",
		}),
		badRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lifeboat_invalid_records_total",
			Help: "Node records (lifeboat.dev/interruption and lifeboat.dev/node-repair-state annotations) that could not be read or failed validation, counted once per node and content; such a record is never acted on (a repair state is read as empty, and replaced at its next write).",
		}),
		leftToNewer: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_left_to_newer_total",
			Help: "What this binary leaves to a newer Lifeboat, by what (record: a node record of a newer schema version, left whole; notice: a recorded notice of a kind this binary does not know, while it works on the node's other notices), counted once per node and record version or notice. Seen during an upgrade or after a rollback.",
		}, []string{"what"}),
	}
	m.Registry.MustRegister(m.serverRefused)
	m.instanceStatus = newInstanceStatusMetrics(m.Registry)
	m.nodeRepair = newNodeRepairMetrics(m.Registry)
	m.panics = newPanics()
	m.Registry.MustRegister(m.panics)
	m.Registry.MustRegister(newBuildInfo())
	m.retained = newRetained()
	m.eventsDropped = newEventsDropped()
	m.latency = newLatency(m.Registry)
	m.zeroKnown()
	m.Registry.MustRegister(m.retained)
	m.Registry.MustRegister(m.eventsDropped)
	m.ignoredMessages = newIgnoredMessages()
	m.Registry.MustRegister(m.ignoredMessages)
	m.Registry.MustRegister(m.untagged, m.setupProblems)
	m.Registry.MustRegister(m.refusedCalls, m.claims, m.badRecords, m.leftToNewer, m.budget, m.budgetChanges, m.checkFindings, m.checkRun, m.drainShare, m.kubeRequests, m.kubeThrottled, m.kubeLatency, m.episodes, m.drainClaims, m.detachWait, m.podsLeft, m.blockedPods, m.imdsPolls, m.notices, m.actions, m.drainSeconds, m.evictions, m.queueMessages, m.queueLag,
		m.sqsCalls, m.awsCalls, m.awsDenied, m.leader, m.sourceHealthy, m.configWarn, m.noticeWarn,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// newBuildInfo is the build's info gauge, set once: its labels carry the information.
func newBuildInfo() prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "lifeboat_build_info",
		Help:        "Always 1: the running build's version, commit and Go version, as `lifeboat version` reports them. Present from start, for dashboards' variables and for joins.",
		ConstLabels: prometheus.Labels{"version": version.Version, "commit": commit(), "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

func commit() string {
	c, _ := version.Build()
	return c
}

// labelValue is a value in snake_case, as Prometheus label values are: the names Lifeboat
// uses elsewhere (notice kinds, readiness reasons) are kebab-case.
func labelValue(s string) string { return strings.ReplaceAll(s, "-", "_") }

func result(err error) string {
	if err != nil {
		return ResultError
	}
	return ResultOK
}

// InstanceCallRefused counts a call on an instance the instance gate refused.
func (m *Metrics) InstanceCallRefused(call string) {
	if m == nil {
		return
	}
	m.refusedCalls.WithLabelValues(call).Inc()
}

// Claim checks, as lifeboat_instance_claims_refused_total names them.
const (
	ClaimCheckEC2              = "ec2"
	ClaimCheckInstanceMetadata = "instance_metadata"
)

// ClaimRefused counts a node's claim to an instance refused by check (ClaimCheckEC2, ...) on
// path (the ownership paths' names).
func (m *Metrics) ClaimRefused(check, path string) {
	if m == nil {
		return
	}
	m.claims.WithLabelValues(check, path).Inc()
}

// ClaimPaths starts lifeboat_instance_claims_refused_total at 0 for the paths this process
// runs, which their owner names: the controller's and the agent's differ.
func (m *Metrics) ClaimPaths(check string, paths []string) {
	if m == nil {
		return
	}
	for _, p := range paths {
		m.claims.WithLabelValues(check, p)
	}
}

// NoticeUntagged counts a notice for this cluster's node not acted on for its instance's tags.
func (m *Metrics) NoticeUntagged() {
	if m == nil {
		return
	}
	m.untagged.Inc()
}

// InvalidRecord counts a node record that was unreadable or invalid.
func (m *Metrics) InvalidRecord() {
	if m == nil {
		return
	}
	m.badRecords.Inc()
}

// What a binary leaves to a newer one (LeftToNewer).
const (
	LeftRecord = "record"
	LeftNotice = "notice"
)

// LeftToNewer counts a node record (LeftRecord) or a recorded notice (LeftNotice) this binary
// does not understand and leaves to a newer one.
func (m *Metrics) LeftToNewer(what string) {
	if m == nil {
		return
	}
	m.leftToNewer.WithLabelValues(what).Inc()
}

// ObserveIMDS records one poll; it fits imds.Options.Observe.
func (m *Metrics) ObserveIMDS(path string, err error) {
	if m != nil {
		m.imdsPolls.WithLabelValues(path, result(err)).Inc()
	}
}

// ObserveSQS records one SQS call; it fits sqs.ConsumerOptions.Observe.
func (m *Metrics) ObserveSQS(event string, err error) {
	if m != nil {
		m.sqsCalls.WithLabelValues(event, result(err)).Inc()
	}
}

// Notice counts a notice received.
func (m *Metrics) Notice(kind, source string) {
	if m != nil {
		m.notices.WithLabelValues(labelValue(kind), labelValue(source)).Inc()
	}
}

// Action counts an action and its result (one of the Result constants).
func (m *Metrics) Action(action, result string) {
	if m != nil {
		m.actions.WithLabelValues(action, result).Inc()
	}
}

// ActionErr counts an action as ok or error.
func (m *Metrics) ActionErr(action string, err error) { m.Action(action, result(err)) }

// Drain records a finished drain; allowed, when above zero, is the time it had from its start
// to the deadline.
func (m *Metrics) Drain(d, allowed time.Duration, err error) {
	if m != nil {
		m.drainSeconds.WithLabelValues(result(err)).Observe(d.Seconds())
		m.actions.WithLabelValues(ActionDrain, result(err)).Inc()
		if allowed > 0 {
			m.drainShare.Observe(d.Seconds() / allowed.Seconds())
		}
	}
}

// CheckKey is a namespace and a reason of the periodic check (`lifeboat check`).
type CheckKey struct{ Namespace, Reason string }

// CheckFindings replaces the periodic check's findings with those of a check that ran at at; on an
// error the last findings stay.
func (m *Metrics) CheckFindings(workloads map[CheckKey]int, at time.Time, err error) {
	if m == nil {
		return
	}
	m.checkRun.WithLabelValues(result(err)).Set(float64(at.Unix()))
	if err != nil {
		return
	}
	m.checkFindings.Reset()
	for k, n := range workloads {
		m.checkFindings.WithLabelValues(k.Namespace, labelValue(k.Reason)).Set(float64(n))
	}
}

// KubeRequest counts one Kubernetes API request, and apart those the server throttled; it
// fits kube.RequestObserver.
func (m *Metrics) KubeRequest(client, verb, resource, code string, throttled bool, took time.Duration) {
	if m == nil {
		return
	}
	m.kubeRequests.WithLabelValues(client, verb, resource, code).Inc()
	if throttled {
		m.kubeThrottled.WithLabelValues(client, verb, resource).Inc()
	}
	if verb != "watch" {
		m.kubeLatency.WithLabelValues(verb).Observe(took.Seconds())
	}
}

// Evictions adds n to the evictions of a result (EvictionEvicted, ...).
func (m *Metrics) Evictions(result string, n int) {
	if m != nil && n > 0 {
		m.evictions.WithLabelValues(result).Add(float64(n))
	}
}

// PodLeft counts a pod a drain left on its node, by reason (drain.Reason.Label).
func (m *Metrics) PodLeft(reason string) {
	if m != nil {
		m.podsLeft.WithLabelValues(reason).Inc()
	}
}

// BlockedPod adds delta (1 when a pod's eviction starts being refused, -1 when that ends) to
// the blocked pods of the reason.
func (m *Metrics) BlockedPod(reason string, delta float64) {
	if m != nil {
		m.blockedPods.WithLabelValues(reason).Add(delta)
	}
}

// QueueMessage counts a handled message by outcome.
func (m *Metrics) QueueMessage(outcome string) {
	if m != nil {
		m.queueMessages.WithLabelValues(outcome).Inc()
	}
}

// QueueLag records how long a message waited in the queue.
func (m *Metrics) QueueLag(d time.Duration) {
	if m != nil && d >= 0 {
		m.queueLag.Observe(d.Seconds())
	}
}

// AWSCall counts an EC2 or Auto Scaling call. notFound, when not nil, is the error meaning
// "nothing to act on", counted apart from failures.
func (m *Metrics) AWSCall(operation string, err, notFound error) {
	if m == nil {
		return
	}
	r := result(err)
	if err != nil && notFound != nil && errors.Is(err, notFound) {
		r = ResultNotFound
	}
	if _, denied := cloud.Denied(err); denied {
		r = ResultDenied
		m.awsDenied.WithLabelValues(operation, cloud.IAMAction(operation)).Inc()
	}
	m.awsCalls.WithLabelValues(operation, r).Inc()
}

// Leader sets whether this replica leads; until the first call there is no lifeboat_leader
// series, so that a sum over replicas counts controllers only.
func (m *Metrics) Leader(leading bool) {
	if m != nil {
		m.leader.WithLabelValues().Set(b2f(leading))
	}
}

// SourceHealthy sets a notice source's health.
func (m *Metrics) SourceHealthy(source string, healthy bool) {
	if m != nil {
		m.sourceHealthy.WithLabelValues(source).Set(b2f(healthy))
	}
}

// SetupProblems sets what the last check of the AWS set-up found, by check.
func (m *Metrics) SetupProblems(byCheck map[string]int) {
	if m == nil {
		return
	}
	for check, n := range byCheck {
		m.setupProblems.WithLabelValues(check).Set(float64(n))
	}
}

// ConfigWarning flags a configuration warning found at start.
func (m *Metrics) ConfigWarning(name string) {
	if m != nil {
		m.configWarn.WithLabelValues(name).Set(1)
	}
}

// Notice problems, for NoticeWarning.
const (
	ProblemStartTimeUnreadable   = "start_time_unreadable"
	ProblemEntityNotInstance     = "entity_not_instance"
	ProblemEventStateUnknown     = "event_state_unknown"
	ProblemEventCodeUnknown      = "event_code_unknown"
	ProblemEventUnreadable       = "event_unreadable"
	ProblemLifecycleStateUnknown = "lifecycle_state_unknown"
)

// NoticeWarning counts a detail that could not be read while the rest of its notice or
// message was acted on.
func (m *Metrics) NoticeWarning(problem string) {
	if m != nil {
		m.noticeWarn.WithLabelValues(problem).Inc()
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Value returns the current value of a counter or gauge sample (for a histogram: its
// observation count) whose labels include all the given name/value pairs, summed over the
// matching samples; 0 when there is none. It reads through the registry, as a scrape would,
// so tests check the exposed names.
func (m *Metrics) Value(metric string, labelPairs ...string) float64 {
	families, err := m.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
	samples:
		for _, s := range f.GetMetric() {
			for i := 0; i+1 < len(labelPairs); i += 2 {
				found := false
				for _, l := range s.GetLabel() {
					if l.GetName() == labelPairs[i] && l.GetValue() == labelPairs[i+1] {
						found = true
					}
				}
				if !found {
					continue samples
				}
			}
			switch {
			case s.Counter != nil:
				sum += s.GetCounter().GetValue()
			case s.Gauge != nil:
				sum += s.GetGauge().GetValue()
			case s.Histogram != nil:
				sum += float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// DrainClaim counts an event of a drain's ownership (ClaimClaimed, ...).
func (m *Metrics) DrainClaim(event string) {
	if m != nil {
		m.drainClaims.WithLabelValues(event).Inc()
	}
}

// DetachWait records how one wait before the hand-back of an instance ended, and how long
// it took.
func (m *Metrics) DetachWait(wait, outcome string, took time.Duration) {
	if m != nil {
		m.detachWait.WithLabelValues(wait, outcome).Observe(took.Seconds())
	}
}
