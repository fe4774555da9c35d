// SPDX-License-Identifier: Apache-2.0

package config

import (
	"time"

	"lifeboat.dev/lifeboat/internal/webhook"
)

// Config is Lifeboat's effective configuration. Field comments name the variable that sets it.
type Config struct {
	DryRun                bool   // DRY_RUN
	NodeName              string // NODE_NAME
	PodName               string // POD_NAME
	PodNamespace          string // NAMESPACE
	MetadataURL           string // INSTANCE_METADATA_URL
	KubernetesServiceHost string // KUBERNETES_SERVICE_HOST
	KubernetesServicePort string // KUBERNETES_SERVICE_PORT
	Kubeconfig            string // KUBECONFIG
	ClusterName           string // CLUSTER_NAME

	IgnoreDaemonSets           bool    // IGNORE_DAEMON_SETS
	DeleteLocalData            bool    // DELETE_LOCAL_DATA
	PodTerminationGracePeriod  int     // POD_TERMINATION_GRACE_PERIOD, seconds; -1 = the pod's own
	NodeTerminationGracePeriod int     // NODE_TERMINATION_GRACE_PERIOD, seconds
	KubeAPIQPS                 float64 // KUBE_API_QPS
	KubeAPIBurst               int     // KUBE_API_BURST
	UseAPIServerCache          bool    // USE_APISERVER_CACHE
	CordonOnly                 bool    // CORDON_ONLY
	TaintNode                  bool    // TAINT_NODE
	TaintEffect                string  // TAINT_EFFECT
	EnableOutOfServiceTaint    bool    // ENABLE_OUT_OF_SERVICE_TAINT
	NodeCondition              bool    // NODE_CONDITION
	ExcludeFromLoadBalancers   bool    // EXCLUDE_FROM_LOAD_BALANCERS
	UptimeFromFile             string  // UPTIME_FROM_FILE
	Workers                    int     // WORKERS
	ForceDeleteBeforeDeadline  int     // FORCE_DELETE_BEFORE_DEADLINE_SECONDS; 0 = never

	WebhookURL          string            // WEBHOOK_URL (secret)
	WebhookProxy        string            // WEBHOOK_PROXY (secret: may hold credentials)
	WebhookHeaders      map[string]string // WEBHOOK_HEADERS (secret: may hold tokens)
	WebhookTemplate     string            // WEBHOOK_TEMPLATE
	WebhookTemplateFile string            // WEBHOOK_TEMPLATE_FILE
	WebhookNTHKinds     bool              // WEBHOOK_NTH_KINDS

	EnableSpotInterruptionDraining bool          // ENABLE_SPOT_INTERRUPTION_DRAINING
	EnableScheduledEventDraining   bool          // ENABLE_SCHEDULED_EVENT_DRAINING
	EnableRebalanceMonitoring      bool          // ENABLE_REBALANCE_MONITORING
	EnableRebalanceDraining        bool          // ENABLE_REBALANCE_DRAINING
	EnableASGLifecycleDraining     bool          // ENABLE_ASG_LIFECYCLE_DRAINING
	EnableSQSTerminationDraining   bool          // ENABLE_SQS_TERMINATION_DRAINING
	MetadataTries                  int           // METADATA_TRIES
	IMDSPollInterval               time.Duration // IMDS_POLL_INTERVAL
	ASGLifecycleHookName           string        // ASG_LIFECYCLE_HOOK_NAME
	AllowIMDSv1                    bool          // ALLOW_IMDSV1

	QueueURL                            string        // QUEUE_URL
	AWSRegion                           string        // AWS_REGION (or parsed from QUEUE_URL, see Validate)
	AWSEndpoint                         string        // AWS_ENDPOINT
	CheckTagBeforeDraining              bool          // CHECK_TAG_BEFORE_DRAINING
	ManagedTag                          string        // MANAGED_TAG
	UseProviderID                       bool          // USE_PROVIDER_ID
	WaitForVolumeDetachment             bool          // WAIT_FOR_VOLUME_DETACHMENT
	WaitForLoadBalancerTargets          string        // WAIT_FOR_LOAD_BALANCER_TARGETS: auto, true or false
	DeleteSQSMsgIfNodeNotFound          bool          // DELETE_SQS_MSG_IF_NODE_NOT_FOUND
	CompleteLifecycleActionDelaySeconds int           // COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS
	ASGLaunchReadyTimeout               time.Duration // ASG_LAUNCH_READY_TIMEOUT
	HeartbeatInterval                   int           // HEARTBEAT_INTERVAL, seconds; -1 = off
	HeartbeatUntil                      int           // HEARTBEAT_UNTIL, seconds; -1 = default when heartbeats are on
	AbandonOnIncompleteDrain            bool          // ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN
	RetainedDrainTimeout                time.Duration // RETAINED_DRAIN_TIMEOUT
	LeaseName                           string        // LEADER_ELECTION_LEASE_NAME
	LeaseDuration                       time.Duration // LEADER_ELECTION_LEASE_DURATION
	LeaseRenewDeadline                  time.Duration // LEADER_ELECTION_RENEW_DEADLINE
	LeaseRetryPeriod                    time.Duration // LEADER_ELECTION_RETRY_PERIOD
	SQSMsgVisibilityTimeoutSec          int           // SQS_MSG_VISIBILITY_TIMEOUT_SEC
	QueueAllowedAccounts                []string      // QUEUE_ALLOWED_ACCOUNTS
	EnableInstanceStatusDraining        bool          // ENABLE_INSTANCE_STATUS_DRAINING
	InstanceStatusInterval              int           // INSTANCE_STATUS_INTERVAL, seconds
	InstanceImpairedThreshold           int           // INSTANCE_IMPAIRED_THRESHOLD, seconds
	SetImpairedInstanceUnhealthy        bool          // SET_IMPAIRED_INSTANCE_UNHEALTHY

	// Node health (controller): repairs driven by Node conditions.
	EnableNodeRepair                bool              // ENABLE_NODE_REPAIR
	NodeRepairConditions            []RepairCondition // NODE_REPAIR_CONDITIONS; empty = DefaultRepairPolicies
	NodeRepairPolicies              RepairPolicies    // NODE_REPAIR_POLICIES, matched before the base table
	NodeRepairDrainTimeout          time.Duration     // NODE_REPAIR_DRAIN_TIMEOUT
	NodeRepairAction                string            // NODE_REPAIR_ACTION
	NodeRepairMaxUnhealthyPercent   int               // NODE_REPAIR_MAX_UNHEALTHY_PERCENT
	NodeRepairMaxParallel           int               // NODE_REPAIR_MAX_PARALLEL; 0 = no cap
	NodeRepairMaxPerHour            int               // NODE_REPAIR_MAX_PER_HOUR; 0 = no cap
	NodeRepairStaleAfter            time.Duration     // NODE_REPAIR_STALE_AFTER; 0 = never stale
	NodeRepairRebootWait            time.Duration     // NODE_REPAIR_REBOOT_WAIT
	NodeRepairNodeSelector          string            // NODE_REPAIR_NODE_SELECTOR; "" = every node
	NodeRepairPaused                bool              // NODE_REPAIR_PAUSED
	NodeRepairEKSAutoRepaired       string            // NODE_REPAIR_EKS_AUTO_REPAIRED_NODEGROUPS
	NodeRepairEKSLookup             bool              // NODE_REPAIR_EKS_LOOKUP
	NodeRepairKarpenterRepairs      bool              // NODE_REPAIR_KARPENTER_REPAIRS
	DeleteNodeAfterTermination      bool              // DELETE_NODE_AFTER_TERMINATION
	NodeCleanupInterval             time.Duration     // NODE_CLEANUP_INTERVAL
	DeadInstanceFastPath            bool              // DEAD_INSTANCE_FAST_PATH
	DeadInstanceFastPathUnreachable bool              // DEAD_INSTANCE_FAST_PATH_UNREACHABLE

	JSONLogging      bool   // JSON_LOGGING
	LogLevel         string // LOG_LEVEL
	LogFormatVersion string // LOG_FORMAT_VERSION

	EnablePrometheusServer           bool              // ENABLE_PROMETHEUS_SERVER
	PrometheusServerPort             int               // PROMETHEUS_SERVER_PORT
	PrometheusServerBindAddress      string            // PROMETHEUS_SERVER_BIND_ADDRESS; "" = every interface
	CheckInterval                    time.Duration     // READINESS_REPORT_INTERVAL; 0 = off
	EnableProbesServer               bool              // ENABLE_PROBES_SERVER
	ProbesServerPort                 int               // PROBES_SERVER_PORT
	ProbesServerBindAddress          string            // PROBES_SERVER_BIND_ADDRESS; "" = every interface
	ProbesServerEndpoint             string            // PROBES_SERVER_ENDPOINT
	EmitKubernetesEvents             bool              // EMIT_KUBERNETES_EVENTS
	KubernetesEventsExtraAnnotations map[string]string // KUBERNETES_EVENTS_EXTRA_ANNOTATIONS

	// webhookHeadersRaw keeps WEBHOOK_HEADERS as given, for printing.
	webhookHeadersRaw string

	// defaulted are the settings left at their defaults (see Defaulted).
	defaulted map[string]bool
}

// Setting describes one configuration variable: how it is spelled, its default, and how its
// value is checked. The table in settings() is the single source for parsing, `lifeboat
// config`, the generated reference documentation and the tests.
type Setting struct {
	Env     string   // the variable, as NTH spells it
	Flag    string   // the flag name without dashes
	Aliases []string // deprecated variables that mean the same; each is also accepted as a flag
	Default string   // applied through the same parser as user input
	Usage   string
	Group   string // heading in the reference documentation
	Secret  bool   // never printed or logged once set by the user

	// Lifeboat marks a setting NTH does not have.
	Lifeboat bool
	// NTHDefault is set where Lifeboat deliberately differs from NTH's default; Why says why.
	NTHDefault string
	Why        string

	value value
}

const (
	groupGeneral  = "General"
	groupKube     = "Kubernetes API"
	groupDrain    = "Draining"
	groupIMDS     = "Agent mode (instance metadata)"
	groupQueue    = "Controller mode (queue)"
	groupWebhook  = "Webhook"
	groupHealth   = "Controller mode (node health)"
	groupOperate  = "Logs, metrics, probes and events"
	defaultTaints = "NoSchedule"
)

// DefaultWebhookTemplate is WEBHOOK_TEMPLATE's default, the webhook package's own.
const DefaultWebhookTemplate = webhook.DefaultTemplate

// settings binds every setting to its field in c.
func settings(c *Config) []*Setting {
	return []*Setting{
		// General
		{Env: "DRY_RUN", Flag: "dry-run", Default: "false", Group: groupGeneral, value: boolValue{&c.DryRun},
			Usage: "Log and emit Events about what would happen; change nothing (no node, pod, queue or lifecycle writes)."},
		{Env: "NODE_NAME", Flag: "node-name", Group: groupGeneral, value: stringValue{&c.NodeName},
			Usage: "The node this pod runs on. Required in agent mode, where it is the node Lifeboat protects."},
		{Env: "POD_NAME", Flag: "pod-name", Group: groupGeneral, value: stringValue{&c.PodName},
			Usage: "Lifeboat's own pod: an agent never evicts it; a controller evicts it last on a node it drains, once every other pod's eviction was accepted, and its standby takes over. Also the leader-election identity."},
		{Env: "NAMESPACE", Flag: "pod-namespace", Default: "kube-system", Group: groupGeneral, value: stringValue{&c.PodNamespace},
			Usage:      "Lifeboat's own namespace: its pod is never evicted and the controller's Lease lives here.",
			NTHDefault: "", Why: "the controller's leader-election Lease needs a namespace even when the Downward API does not set one"},
		{Env: "CLUSTER_NAME", Flag: "cluster-name", Group: groupGeneral, Lifeboat: true, value: stringValue{&c.ClusterName},
			Usage: "This cluster's name. When set, controller mode acts only on instances tagged kubernetes.io/cluster/<name> (owned or shared)."},

		// Kubernetes API
		{Env: "KUBECONFIG", Flag: "kubeconfig", Group: groupKube, Lifeboat: true, value: stringValue{&c.Kubeconfig},
			Usage: "Path to a kubeconfig file. Unset: the in-cluster configuration."},
		{Env: "KUBERNETES_SERVICE_HOST", Flag: "kubernetes-service-host", Group: groupKube, value: stringValue{&c.KubernetesServiceHost},
			Usage: "API server host for the in-cluster configuration."},
		{Env: "KUBERNETES_SERVICE_PORT", Flag: "kubernetes-service-port", Group: groupKube, value: stringValue{&c.KubernetesServicePort},
			Usage: "API server port for the in-cluster configuration."},
		{Env: "KUBE_API_QPS", Flag: "kube-api-qps", Default: "0", Group: groupKube, value: floatValue{p: &c.KubeAPIQPS, zeroAuto: true},
			Usage:      "Cap on Lifeboat's Kubernetes request rate (requests per second); 0: no cap. Either way Lifeboat paces itself by the API server: its requests share one bound on how many are at the server at once (watches aside), 64 at start, which rises while requests wait and few queue at the server, halves on a 429, and comes down when the answers' time beyond an idle server's shows more queued at the server than a quarter of the bound (between 1 and 128; only 429s take it under 64). Cordons go first, on a bound of their own (16), and while any is at the server the rest keep to an eighth of theirs; then the rest, soonest node deadline first; Kubernetes Events last. Leader election's Lease has its own small client (10 requests/s) outside it, so renewals never wait behind evictions.",
			NTHDefault: "5", Why: "a fixed 5 requests/s cordons about 40 of 50 simultaneous Spot interruptions within their two minutes; Lifeboat is paced by the API server's answers, and a number here only caps it"},
		{Env: "KUBE_API_BURST", Flag: "kube-api-burst", Default: "200", Group: groupKube, value: intValue{p: &c.KubeAPIBurst, min: 1, max: maxInt},
			Usage:      "With KUBE_API_QPS set: requests that may go at once after a quiet spell, above the rate.",
			NTHDefault: "10", Why: "lets a node's evictions go out at once; see KUBE_API_QPS"},
		{Env: "USE_APISERVER_CACHE", Flag: "use-apiserver-cache", Default: "true", Group: groupKube, value: boolValue{&c.UseAPIServerCache},
			Usage:      "Read pods from the API server's watch: in controller mode, every drain reads one shared pod informer (about 1.4 KiB of memory a pod in the cluster); in the agent, a list from the watch cache (resourceVersion=0). false: each drain lists its node's pods with a quorum read from etcd and watches them itself.",
			NTHDefault: "false", Why: "cheaper for the API server, and safe because every list source goes through the same pod filters"},

		// Draining
		{Env: "IGNORE_DAEMON_SETS", Flag: "ignore-daemon-sets", Default: "true", Group: groupDrain, value: boolValue{&c.IgnoreDaemonSets},
			Usage: "Leave DaemonSet-owned pods in place when draining."},
		{Env: "DELETE_LOCAL_DATA", Flag: "delete-local-data", Default: "true", Group: groupDrain, value: boolValue{&c.DeleteLocalData},
			Usage: "Evict pods that use emptyDir volumes (their data is lost). false: such pods block the drain and are reported."},
		{Env: "POD_TERMINATION_GRACE_PERIOD", Flag: "pod-termination-grace-period", Aliases: []string{"GRACE_PERIOD"}, Default: "-1",
			Group: groupDrain, value: intValue{p: &c.PodTerminationGracePeriod, min: 0, max: maxInt, minusOne: true},
			Usage: "Grace period in seconds given to each evicted pod; -1 uses the pod's own (capped so pods end before the deadline)."},
		{Env: "NODE_TERMINATION_GRACE_PERIOD", Flag: "node-termination-grace-period", Default: "120", Group: groupDrain,
			value: intValue{p: &c.NodeTerminationGracePeriod, min: 0, max: maxInt},
			Usage: "Seconds before the event at which draining starts; the drain's time budget."},
		{Env: "CORDON_ONLY", Flag: "cordon-only", Default: "false", Group: groupDrain, value: boolValue{&c.CordonOnly},
			Usage: "Cordon affected nodes but never drain them."},
		{Env: "TAINT_NODE", Flag: "taint-node", Default: "false", Group: groupDrain, value: boolValue{&c.TaintNode},
			Usage: "Add the interruption taint for the notice kind (value: the notice id)."},
		{Env: "TAINT_EFFECT", Flag: "taint-effect", Default: defaultTaints, Group: groupDrain,
			value: enumValue{&c.TaintEffect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}},
			Usage: "Effect of the interruption taints."},
		{Env: "ENABLE_OUT_OF_SERVICE_TAINT", Flag: "enable-out-of-service-taint", Default: "false", Group: groupDrain, value: boolValue{&c.EnableOutOfServiceTaint},
			Usage: "After the drain, taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute."},
		{Env: "NODE_CONDITION", Flag: "node-condition", Default: "true", Group: groupDrain, Lifeboat: true, value: boolValue{&c.NodeCondition},
			Usage: "Show the interruption on the Node: the condition lifeboat.dev/Interruption (True while an episode holds the node, its reason the phase, its message what the phase waits for, such as the pods a disruption budget holds; False once the episode is over) and the label lifeboat.dev/phase. Condition writes go on the status subresource, at the lowest priority of the request budget, at most one per phase change and one refresh of the message per 30 s per node. false: neither is written."},
		{Env: "EXCLUDE_FROM_LOAD_BALANCERS", Flag: "exclude-from-load-balancers", Default: "false", Group: groupDrain, value: boolValue{&c.ExcludeFromLoadBalancers},
			Usage: "Label node.kubernetes.io/exclude-from-external-load-balancers before cordoning."},
		{Env: "UPTIME_FROM_FILE", Flag: "uptime-from-file", Group: groupDrain, value: stringValue{&c.UptimeFromFile},
			Usage: "File to read uptime from (/proc/uptime format), to uncordon a node after a scheduled reboot."},
		{Env: "FORCE_DELETE_BEFORE_DEADLINE_SECONDS", Flag: "force-delete-before-deadline-seconds", Default: "0", Group: groupDrain, Lifeboat: true,
			value: intValue{p: &c.ForceDeleteBeforeDeadline, min: 0, max: 3600},
			Usage: "When this many seconds are left before the deadline, delete pods that a PodDisruptionBudget still protects (grace period clamped to the time left). 0 = never: budgets are respected even if the drain misses the deadline."},
		{Env: "WORKERS", Flag: "workers", Default: "10", Group: groupDrain, value: intValue{p: &c.Workers, min: 1, max: 10000},
			Usage: "Notices taken in at once. Controller mode: notices whose ownership and deadline are being looked up (EC2, Auto Scaling) at once, with twice as many queue messages in flight and as many notices of one message (an AWS Health event naming many instances) taken in at once; their cordons and the drains that follow are paced by the API server's answers (KUBE_API_QPS caps them), not by this. Agent mode: notices recorded at once."},
		{Env: "WAIT_FOR_VOLUME_DETACHMENT", Flag: "wait-for-volume-detachment", Default: "true", Group: groupDrain, Lifeboat: true,
			value: boolValue{&c.WaitForVolumeDetachment},
			Usage: "After the drain, before completing the lifecycle action, wait (until the deadline at most) for the VolumeAttachments of the evicted pods' volumes to be gone, so their replacements do not wait on Multi-Attach errors."},
		{Env: "WAIT_FOR_LOAD_BALANCER_TARGETS", Flag: "wait-for-load-balancer-targets", Default: "auto", Group: groupDrain, Lifeboat: true,
			value: enumValue{&c.WaitForLoadBalancerTargets, []string{"auto", "true", "false"}},
			Usage: "After the drain, before completing the lifecycle action, wait (until the deadline at most) until the instance and the evicted pods' IPs have left every ELBv2 target group (absent or unused, no longer draining). auto: on in controller mode, off in agent mode. Needs elasticloadbalancing:DescribeTargetGroups and DescribeTargetHealth; without them the wait is skipped with a warning."},

		// Agent mode
		{Env: "INSTANCE_METADATA_URL", Flag: "metadata-url", Default: "http://169.254.169.254", Group: groupIMDS,
			value: urlValue{p: &c.MetadataURL, schemes: []string{"http", "https"}},
			Usage: "Base URL of the EC2 instance metadata service."},
		{Env: "METADATA_TRIES", Flag: "metadata-tries", Default: "3", Group: groupIMDS, value: intValue{p: &c.MetadataTries, min: 1, max: 100},
			Usage: "Attempts per instance-metadata request."},
		{Env: "IMDS_POLL_INTERVAL", Flag: "imds-poll-interval", Default: "500ms", Group: groupIMDS, Lifeboat: true,
			value: durationValue{p: &c.IMDSPollInterval, min: 100 * time.Millisecond, max: time.Minute},
			Usage: "How often the spot path is polled; the lifecycle state every 2, rebalance every 4, scheduled events every 10 intervals (3.7 requests/s with all on)."},
		{Env: "ASG_LIFECYCLE_HOOK_NAME", Flag: "asg-lifecycle-hook-name", Group: groupIMDS, Lifeboat: true, value: stringValue{&c.ASGLifecycleHookName},
			Usage: "Agent mode with ENABLE_ASG_LIFECYCLE_DRAINING: complete this termination hook's lifecycle action after the drain (needs autoscaling:DescribeAutoScalingInstances and autoscaling:CompleteLifecycleAction). Unset: the hook times out."},
		{Env: "ALLOW_IMDSV1", Flag: "allow-imdsv1", Default: "false", Group: groupIMDS, Lifeboat: true, value: boolValue{&c.AllowIMDSv1},
			Usage: "Fall back to IMDSv1 when no IMDSv2 token can be had. Off: IMDSv2 only."},
		{Env: "ENABLE_SPOT_INTERRUPTION_DRAINING", Flag: "enable-spot-interruption-draining", Default: "true", Group: groupIMDS, value: boolValue{&c.EnableSpotInterruptionDraining},
			Usage: "Drain on Spot interruption notices."},
		{Env: "ENABLE_SCHEDULED_EVENT_DRAINING", Flag: "enable-scheduled-event-draining", Default: "true", Group: groupIMDS, value: boolValue{&c.EnableScheduledEventDraining},
			Usage: "Drain before scheduled maintenance events."},
		{Env: "ENABLE_REBALANCE_MONITORING", Flag: "enable-rebalance-monitoring", Default: "false", Group: groupIMDS, value: boolValue{&c.EnableRebalanceMonitoring},
			Usage: "Cordon on rebalance recommendations."},
		{Env: "ENABLE_REBALANCE_DRAINING", Flag: "enable-rebalance-draining", Default: "false", Group: groupIMDS, value: boolValue{&c.EnableRebalanceDraining},
			Usage: "Cordon and drain on rebalance recommendations."},
		{Env: "ENABLE_ASG_LIFECYCLE_DRAINING", Flag: "enable-asg-lifecycle-draining", Default: "false", Group: groupIMDS, value: boolValue{&c.EnableASGLifecycleDraining},
			Usage: "Drain when the instance's Auto Scaling target lifecycle state becomes Terminated."},

		// Controller mode
		{Env: "ENABLE_SQS_TERMINATION_DRAINING", Flag: "enable-sqs-termination-draining", Default: "false", Group: groupQueue, value: boolValue{&c.EnableSQSTerminationDraining},
			Usage: "Controller mode: process notices from QUEUE_URL for every node of the cluster."},
		{Env: "QUEUE_URL", Flag: "queue-url", Group: groupQueue, value: urlValue{p: &c.QueueURL, schemes: []string{"http", "https"}, optional: true},
			Usage: "SQS queue that EventBridge rules and Auto Scaling hooks send to. Required in controller mode."},
		{Env: "AWS_REGION", Flag: "aws-region", Group: groupQueue, value: stringValue{&c.AWSRegion},
			Usage: "AWS region. Unset: parsed from QUEUE_URL."},
		{Env: "AWS_ENDPOINT", Flag: "aws-endpoint", Group: groupQueue, value: urlValue{p: &c.AWSEndpoint, schemes: []string{"http", "https"}, optional: true},
			Usage: "One endpoint for SQS, EC2 and Auto Scaling (local testing). The SDK's per-service endpoint variables win where set."},
		{Env: "CHECK_TAG_BEFORE_DRAINING", Flag: "check-tag-before-draining", Aliases: []string{"CHECK_ASG_TAG_BEFORE_DRAINING"}, Default: "true",
			Group: groupQueue, value: boolValue{&c.CheckTagBeforeDraining},
			Usage: "Act only on instances that carry MANAGED_TAG."},
		{Env: "MANAGED_TAG", Flag: "managed-tag", Aliases: []string{"MANAGED_ASG_TAG"}, Default: "aws-node-termination-handler/managed",
			Group: groupQueue, value: stringValue{&c.ManagedTag},
			Usage: "Tag key that marks instances Lifeboat may act on (the value is ignored)."},
		{Env: "USE_PROVIDER_ID", Flag: "use-provider-id", Default: "false", Group: groupQueue, value: boolValue{&c.UseProviderID},
			Usage: "true: a node is matched only when its spec.providerID names the instance; false: a node without a providerID is matched too. Either way the node must be the instance as EC2 describes it (its private DNS name, else its private IP), and a providerID EC2 does not bear out is refused."},
		{Env: "DELETE_SQS_MSG_IF_NODE_NOT_FOUND", Flag: "delete-sqs-msg-if-node-not-found", Default: "false", Group: groupQueue, value: boolValue{&c.DeleteSQSMsgIfNodeNotFound},
			Usage: "Delete queue messages about instances with no node in this cluster. Such notices never touch a node or complete a lifecycle action either way."},
		{Env: "COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS", Flag: "complete-lifecycle-action-delay-seconds", Default: "-1", Group: groupQueue,
			value: intValue{p: &c.CompleteLifecycleActionDelaySeconds, min: 0, max: 7200, minusOne: true},
			Usage: "Wait this long after the drain before completing the lifecycle action; -1 = no wait."},
		{Env: "ASG_LAUNCH_READY_TIMEOUT", Flag: "asg-launch-ready-timeout", Default: "10m", Group: groupQueue, Lifeboat: true,
			value: durationValue{p: &c.ASGLaunchReadyTimeout, min: 10 * time.Second, max: 2 * time.Hour},
			Usage: "How long an Auto Scaling launch hook waits for its Node to join and become Ready before Lifeboat completes it; after that the hook is left to its own timeout."},
		{Env: "HEARTBEAT_INTERVAL", Flag: "heartbeat-interval", Default: "-1", Group: groupQueue,
			value: intValue{p: &c.HeartbeatInterval, min: 30, max: 3600, minusOne: true},
			Usage: "Seconds between lifecycle-action heartbeats while a drain runs; -1 = no heartbeats."},
		{Env: "HEARTBEAT_UNTIL", Flag: "heartbeat-until", Default: "-1", Group: groupQueue,
			value: intValue{p: &c.HeartbeatUntil, min: 60, max: 172800, minusOne: true},
			Usage: "Stop heartbeats after this many seconds; -1 = 172800 when HEARTBEAT_INTERVAL is set."},
		{Env: "ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN", Flag: "abandon-lifecycle-action-on-incomplete-drain", Default: "false", Group: groupQueue, Lifeboat: true,
			value: boolValue{&c.AbandonOnIncompleteDrain},
			Usage: "When a termination hook's drain or hand-back cannot finish before its lifecycle action expires, complete the action with ABANDON instead of letting the instance go with pods or volumes still on it, " +
				"but only when the Auto Scaling group's instance lifecycle policy retains abandoned instances (TerminateHookAbandon: retain; read with autoscaling:DescribeAutoScalingGroups). " +
				"Lifeboat then keeps draining the retained instance with no deadline (pods keep their grace periods, nothing is forced) and terminates it itself once it is empty " +
				"(autoscaling:TerminateInstanceInAutoScalingGroup), for at most RETAINED_DRAIN_TIMEOUT. Groups without that policy, and drains a Spot or capacity-reservation warning joins, complete with CONTINUE as before."},
		{Env: "RETAINED_DRAIN_TIMEOUT", Flag: "retained-drain-timeout", Default: "24h", Group: groupQueue, Lifeboat: true,
			value: durationValue{p: &c.RetainedDrainTimeout, min: 10 * time.Second, max: 7 * 24 * time.Hour},
			Usage: "With ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN: how long Lifeboat keeps draining a retained instance; after that it reports (Warning Event, metric, log) and stops, leaving the instance retained, never terminating it with pods on it."},
		{Env: "LEADER_ELECTION_LEASE_NAME", Flag: "leader-election-lease-name", Default: DefaultLeaseName, Group: groupQueue, Lifeboat: true,
			value: objectNameValue{&c.LeaseName},
			Usage: "Controller: the Lease in NAMESPACE that the replicas of one release compete for. Two releases in one namespace (a trial beside the real one) need two names, or one of them waits as a standby for ever; the chart derives it from the release's name."},
		{Env: "LEADER_ELECTION_LEASE_DURATION", Flag: "leader-election-lease-duration", Default: "3s", Group: groupQueue, Lifeboat: true,
			value: durationValue{p: &c.LeaseDuration, min: 2 * time.Second, max: 5 * time.Minute},
			Usage: "Controller: how long a leader's Lease holds without a renewal. A leader killed without releasing it (its node gone, SIGKILL) is replaced this long after its last renewal, plus up to two retry periods; a shorter one takes over sooner but loses the Lease sooner when the API server is slow to answer renewals. A standby that could not read the Lease (an API server outage) counts it again from its first read after, so the leader keeps it through an outage. A leader that stops (SIGTERM, its pod evicted, its work loop ended) releases the Lease at once and is replaced within a retry period."},
		{Env: "LEADER_ELECTION_RENEW_DEADLINE", Flag: "leader-election-renew-deadline", Default: "2s", Group: groupQueue, Lifeboat: true,
			value: durationValue{p: &c.LeaseRenewDeadline, min: time.Second, max: 5 * time.Minute},
			Usage: "Controller: how long the leader keeps trying to renew its Lease before it stops its work and gives the Lease up; less than LEADER_ELECTION_LEASE_DURATION, so that its work has stopped before another replica can take over."},
		{Env: "LEADER_ELECTION_RETRY_PERIOD", Flag: "leader-election-retry-period", Default: "250ms", Group: groupQueue, Lifeboat: true,
			value: durationValue{p: &c.LeaseRetryPeriod, min: 100 * time.Millisecond, max: time.Minute},
			Usage: "Controller: how often the leader renews its Lease (one write each) and a standby looks at it (one read each, at up to 2.2 times this with jitter). It bounds how late a standby notices a Lease that ran out or was released."},
		{Env: "SQS_MSG_VISIBILITY_TIMEOUT_SEC", Flag: "sqs-msg-visibility-timeout-sec", Default: "20", Group: groupQueue,
			value: intValue{p: &c.SQSMsgVisibilityTimeoutSec, min: 1, max: 119},
			Usage: "Visibility timeout of received messages; extended while their work is in progress."},
		{Env: "QUEUE_ALLOWED_ACCOUNTS", Flag: "queue-allowed-accounts", Group: groupQueue, Lifeboat: true,
			value: accountsValue{&c.QueueAllowedAccounts},
			Usage: "Comma-separated AWS account ids (12 digits) whose messages are accepted besides those of the queue's own account, named in QUEUE_URL: an event bus that receives another account's events. Any other account's message is refused and, like a notice about another cluster's instance, kept on the queue unless DELETE_SQS_MSG_IF_NODE_NOT_FOUND=true. A QUEUE_URL that names no account (some local SQS servers) turns the check off, with a warning at start."},
		{Env: "ENABLE_INSTANCE_STATUS_DRAINING", Flag: "enable-instance-status-draining", Default: "false", Group: groupQueue, Lifeboat: true,
			value: boolValue{&c.EnableInstanceStatusDraining},
			Usage: "Controller: every INSTANCE_STATUS_INTERVAL, one DescribeInstanceStatus pass over this cluster's running instances (100 a request). An instance whose instance or system status is impaired, or whose attached EBS check failed, for longer than INSTANCE_IMPAIRED_THRESHOLD is cordoned and drained (NODE_TERMINATION_GRACE_PERIOD is the budget); one that recovers sooner is left alone. The scheduled events the call lists (reboots, maintenance, retirement, stop) are taken as instance metadata's are, and one that is no longer listed releases its node. Needs ec2:DescribeInstanceStatus."},
		{Env: "INSTANCE_STATUS_INTERVAL", Flag: "instance-status-interval", Default: "30", Group: groupQueue, Lifeboat: true,
			value: intValue{p: &c.InstanceStatusInterval, min: 1, max: 3600},
			Usage: "Seconds between two DescribeInstanceStatus passes (ENABLE_INSTANCE_STATUS_DRAINING)."},
		{Env: "INSTANCE_IMPAIRED_THRESHOLD", Flag: "instance-impaired-threshold", Default: "120", Group: groupQueue, Lifeboat: true,
			value: intValue{p: &c.InstanceImpairedThreshold, min: 0, max: 86400},
			Usage: "Seconds an instance's status checks must keep failing before its node is drained (ENABLE_INSTANCE_STATUS_DRAINING); counted from the failure time EC2 states, else from the first pass that saw it."},
		{Env: "SET_IMPAIRED_INSTANCE_UNHEALTHY", Flag: "set-impaired-instance-unhealthy", Default: "false", Group: groupQueue, Lifeboat: true,
			value: boolValue{&c.SetImpairedInstanceUnhealthy},
			Usage: "After draining an impaired instance's node (ENABLE_INSTANCE_STATUS_DRAINING), mark the instance Unhealthy in its Auto Scaling group (SetInstanceHealth, respecting the group's grace period) so that the group replaces it; once the node names the instance and Auto Scaling reports it in that group. Needs autoscaling:SetInstanceHealth."},

		// Node health
		{Env: "ENABLE_NODE_REPAIR", Flag: "enable-node-repair", Default: "false", Group: groupHealth, Lifeboat: true,
			value: boolValue{&c.EnableNodeRepair},
			Usage: "Controller: repair nodes that their node agent (node-problem-detector, the EKS node monitoring agent) reports unhealthy through a Node condition. A node whose condition has held a status for the wait its policy gives it (NODE_REPAIR_POLICIES, NODE_REPAIR_CONDITIONS), counted from the condition's lastTransitionTime, is cordoned and drained as for any notice (NODE_REPAIR_DRAIN_TIMEOUT is the budget), then its instance is handed to its Auto Scaling group as NODE_REPAIR_ACTION says, through the same check of the instance as every call on an instance. Needs autoscaling:SetInstanceHealth (ec2:TerminateInstances with NODE_REPAIR_ACTION=terminate)."},
		{Env: "NODE_REPAIR_CONDITIONS", Flag: "node-repair-conditions", Group: groupHealth, Lifeboat: true,
			value: repairConditionsValue{&c.NodeRepairConditions},
			Usage: "The short form of the policies: comma-separated Type=Status:Duration, e.g. KernelReady=False:30m,AcceleratedHardwareReady=False:10m (status True, False or Unknown; duration 0s to 168h), each a policy that replaces the node after the duration, whatever the reason. When set, it is the base table in place of the default policies (NODE_REPAIR_POLICIES are still matched first). Empty: the default policies, after EKS's node auto repair: AcceleratedHardwareReady=False after 10m; ContainerRuntimeReady, KernelReady, NetworkingReady, StorageReady=False after 30m; Ready=False and Ready=Unknown after 30m; never for DiskPressure or MemoryPressure. A condition that recovers within its duration changes nothing."},
		{Env: "NODE_REPAIR_POLICIES", Flag: "node-repair-policies", Group: groupHealth, Lifeboat: true,
			value: repairPoliciesValue{&c.NodeRepairPolicies},
			Usage: "Policies by condition and reason, matched before the base table (NODE_REPAIR_CONDITIONS, else the default policies); the first policy that matches a condition decides. A YAML or JSON list of {condition, status, reason, wait, action}: status True, False or Unknown; reason, optional, a regular expression (RE2) the condition's whole reason must match; wait 0s to 168h, counted from the condition's transition; action replace (drain, then NODE_REPAIR_ACTION), reboot (drain, then RebootInstances; replaced if still unhealthy NODE_REPAIR_REBOOT_WAIT later; needs ec2:RebootInstances) or none (never repaired, nor counted unhealthy), e.g. [{condition: AcceleratedHardwareReady, status: \"False\", reason: \"NvidiaXID(48|74)Error\", wait: 5m, action: replace}, {condition: KernelReady, status: \"False\", reason: ConntrackExceeded.*, action: none}]."},
		{Env: "NODE_REPAIR_DRAIN_TIMEOUT", Flag: "node-repair-drain-timeout", Default: "10m", Group: groupHealth, Lifeboat: true,
			value: durationValue{p: &c.NodeRepairDrainTimeout, min: 10 * time.Second, max: 24 * time.Hour},
			Usage: "The deadline of a repair's drain, from the moment the repair starts: pods keep their own grace periods unless they would end after it, as for any notice."},
		{Env: "NODE_REPAIR_ACTION", Flag: "node-repair-action", Default: RepairMarkUnhealthy, Group: groupHealth, Lifeboat: true,
			value: enumValue{&c.NodeRepairAction, []string{RepairMarkUnhealthy, RepairTerminate}},
			Usage: "What a repaired node's instance is given once drained: mark-unhealthy marks it Unhealthy in its Auto Scaling group (SetInstanceHealth), which replaces it; an instance in no group is left drained, with an Event and a metric. terminate: the instance is terminated (ec2:TerminateInstances) whether a group holds it or not; a group then replaces it."},
		{Env: "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", Flag: "node-repair-max-unhealthy-percent", Default: "20", Group: groupHealth, Lifeboat: true,
			value: intValue{p: &c.NodeRepairMaxUnhealthyPercent, min: 0, max: 100},
			Usage: "The breakers by share: while more unhealthy nodes (a condition a repair policy repairs, however long it has had its status) than this percent of the cluster's nodes allows, rounded up, no new repair starts; nor in a node group (its Auto Scaling group, else its node-group label) with more than this percent of its nodes unhealthy, rounded up. A cluster of four or a group of three may so repair one node at 20. Repairs already started finish. One correlated false alarm (an agent bug, a bad AMI in one group) then drains nothing. 100: no breaker."},
		{Env: "NODE_REPAIR_MAX_PARALLEL", Flag: "node-repair-max-parallel", Default: "5", Group: groupHealth, Lifeboat: true,
			value: intValue{p: &c.NodeRepairMaxParallel, min: 0, max: maxInt},
			Usage: "At most this many repairs run at once (recorded on their Node and not finished); the next starts when one finishes. 0: no cap."},
		{Env: "NODE_REPAIR_MAX_PER_HOUR", Flag: "node-repair-max-per-hour", Default: "10", Group: groupHealth, Lifeboat: true,
			value: intValue{p: &c.NodeRepairMaxPerHour, min: 0, max: maxInt},
			Usage: "At most this many repairs start within any hour (counted from the records on the Nodes and, for Nodes already gone, by the running controller): a condition writer that marks node after node unhealthy repairs this many at most. 0: no cap."},
		{Env: "NODE_REPAIR_NODE_SELECTOR", Flag: "node-repair-node-selector", Group: groupHealth, Lifeboat: true,
			value: selectorValue{&c.NodeRepairNodeSelector},
			Usage: "A label selector (as kubectl -l takes it, e.g. node.kubernetes.io/instance-type in (p5.48xlarge),team=ml) that limits node repair to the nodes it selects: only they are repaired, and the breakers count only them. Other nodes are left alone by repair, and handled as ever for every other notice. Empty: every node."},
		{Env: "NODE_REPAIR_REBOOT_WAIT", Flag: "node-repair-reboot-wait", Default: "10m", Group: groupHealth, Lifeboat: true,
			value: durationValue{p: &c.NodeRepairRebootWait, min: time.Second, max: 24 * time.Hour},
			Usage: "After a repair policy's reboot (RebootInstances, once the node is drained), how long the node's condition has to clear. A node whose condition still has the status its policy repairs once this has passed since the reboot is replaced (drained again, then NODE_REPAIR_ACTION); one whose condition clears is released without a replacement, with an Event NodeRepairRecovered. Each step is recorded on the Node (lifeboat.dev/node-repair-state), so a restart or a new leader goes on from it."},
		{Env: "NODE_REPAIR_STALE_AFTER", Flag: "node-repair-stale-after", Default: "15m", Group: groupHealth, Lifeboat: true,
			value: durationValue{p: &c.NodeRepairStaleAfter, min: time.Minute, max: 24 * time.Hour, zeroOff: true},
			Usage: "A due condition whose lastHeartbeatTime is more than this older than the node's Ready heartbeat, while the node is Ready, is stale: its agent stopped refreshing it while the kubelet still reports, so what it says may have latched. It is not repaired, with a Warning Event NodeConditionStale; once its agent refreshes it, it is. Longer than the agents' refresh period and the kubelet's status report (5 minutes) together. Ready itself is never stale. 0: never judged stale."},
		{Env: "NODE_REPAIR_PAUSED", Flag: "node-repair-paused", Default: "false", Group: groupHealth, Lifeboat: true,
			value: boolValue{&c.NodeRepairPaused},
			Usage: "Start no new repair (repairs already started finish). A single node is kept out of repairs with the annotation lifeboat.dev/node-repair=disabled."},
		{Env: "NODE_REPAIR_EKS_AUTO_REPAIRED_NODEGROUPS", Flag: "node-repair-eks-auto-repaired-nodegroups", Group: groupHealth, Lifeboat: true,
			value: stringValue{&c.NodeRepairEKSAutoRepaired},
			Usage: "Comma-separated EKS managed node groups whose node auto repair is on (*: every managed node group): their nodes (label eks.amazonaws.com/nodegroup) are left to EKS's repair, with one Event each, without asking EKS. With NODE_REPAIR_EKS_LOOKUP off, these are the only node groups left to EKS; with it on, the list is a short cut and an override (a node group listed is left to EKS whatever EKS says)."},
		{Env: "NODE_REPAIR_EKS_LOOKUP", Flag: "node-repair-eks-lookup", Default: "false", Group: groupHealth, Lifeboat: true,
			value: boolValue{&c.NodeRepairEKSLookup},
			Usage: "Ask EKS whether a node's managed node group (label eks.amazonaws.com/nodegroup) has node auto repair on (DescribeNodegroup's nodeRepairConfig, in the cluster CLUSTER_NAME names): if so the node is left to EKS, with one Event. Asked only for a node whose repair came due, once per node group every 5 minutes. While EKS cannot answer (the permission refused, throttling, no such node group), the node is not repaired: a Warning Event NodeRepairOwnerUnknown says why, once, and EKS is asked again a minute later; a node is never repaired by both. Needs eks:DescribeNodegroup, an opt-in grant (describe_eks_nodegroups in deploy/aws), and CLUSTER_NAME set to the EKS cluster's name; off by default as the grant is: turn both on together."},
		{Env: "NODE_REPAIR_KARPENTER_REPAIRS", Flag: "node-repair-karpenter-repairs", Default: "true", Group: groupHealth, Lifeboat: true,
			value: boolValue{&c.NodeRepairKarpenterRepairs},
			Usage: "Karpenter's node repair is on (its NodeRepair feature gate, settings.featureGates.nodeRepair in Karpenter's chart): the nodes Karpenter manages (label karpenter.sh/nodepool) are left to it, with one Event each. false: Lifeboat repairs them as any other node; set it so when Karpenter's node repair is off, or nobody repairs them."},
		{Env: "DELETE_NODE_AFTER_TERMINATION", Flag: "delete-node-after-termination", Default: "false", Group: groupHealth, Lifeboat: true,
			value: boolValue{&c.DeleteNodeAfterTermination},
			Usage: "Controller: delete the Node of a terminated instance, for clusters without a cloud controller manager that would (k3s, some kOps). Every NODE_CLEANUP_INTERVAL, one DescribeInstances asks about the Nodes whose Ready condition is not True; a Node is deleted once EC2 says its instance is terminated or, once EC2 no longer describes it, when a sighting of it shutting down or terminated was recorded on the Node (lifeboat.dev/instance-gone). Never a Node whose name or addresses EC2 did not give for that instance: refused with a Warning Event. Needs delete on nodes."},
		{Env: "NODE_CLEANUP_INTERVAL", Flag: "node-cleanup-interval", Default: "60s", Group: groupHealth, Lifeboat: true,
			value: durationValue{p: &c.NodeCleanupInterval, min: time.Second, max: time.Hour},
			Usage: "Time between two passes of DELETE_NODE_AFTER_TERMINATION."},
		{Env: "DEAD_INSTANCE_FAST_PATH", Flag: "dead-instance-fast-path", Default: "true", Group: groupHealth, Lifeboat: true,
			value: boolValue{&c.DeadInstanceFastPath},
			Usage: "Controller, every notice kind: when a node's drain starts while its Ready condition is Unknown (the node lifecycle controller's verdict) and EC2 says its instance is stopped, stopping, shutting-down or terminated, nothing runs its pods any more: they are deleted with grace 0, with no eviction and no budget wait, and the hand-back's volume waits are skipped. Reported as a Warning Event DeadInstanceFastPath, a metric and a log line. Acts only on that certainty, so it is on by default."},
		{Env: "DEAD_INSTANCE_FAST_PATH_UNREACHABLE", Flag: "dead-instance-fast-path-unreachable", Default: "false", Group: groupHealth, Lifeboat: true,
			value: boolValue{&c.DeadInstanceFastPathUnreachable},
			Usage: "Also take the fast path for a node whose Ready condition is Unknown while EC2 says its instance is running (unreachable, or failing status checks). That may be a network partition, not a death: a StatefulSet's pod could then run twice. Opt in only where that is acceptable."},

		// Webhook
		{Env: "WEBHOOK_URL", Flag: "webhook-url", Group: groupWebhook, Secret: true,
			value: urlValue{p: &c.WebhookURL, schemes: []string{"http", "https"}, optional: true},
			Usage: "POST a message here once per node interruption."},
		{Env: "WEBHOOK_PROXY", Flag: "webhook-proxy", Group: groupWebhook, Secret: true,
			value: urlValue{p: &c.WebhookProxy, schemes: []string{"http", "https", "socks5", "tcp"}, optional: true},
			Usage: "HTTP(S) proxy for webhook requests."},
		{Env: "WEBHOOK_HEADERS", Flag: "webhook-headers", Default: `{"Content-type":"application/json"}`, Group: groupWebhook, Secret: true,
			value: headersValue{&c.WebhookHeaders, &c.webhookHeadersRaw},
			Usage: "JSON object of headers sent with each webhook."},
		{Env: "WEBHOOK_TEMPLATE", Flag: "webhook-template", Default: DefaultWebhookTemplate, Group: groupWebhook, value: templateValue{&c.WebhookTemplate},
			Usage: "Go template of the webhook body."},
		{Env: "WEBHOOK_TEMPLATE_FILE", Flag: "webhook-template-file", Group: groupWebhook, value: stringValue{&c.WebhookTemplateFile},
			Usage: "File holding the webhook template; wins over WEBHOOK_TEMPLATE."},
		{Env: "WEBHOOK_NTH_KINDS", Flag: "webhook-nth-kinds", Default: "false", Group: groupWebhook, Lifeboat: true, value: boolValue{&c.WebhookNTHKinds},
			Usage: "Give webhook templates NTH's values of .Kind and .Monitor (SPOT_ITN, SQS_MONITOR, ...) instead of Lifeboat's (spot-interruption, queue), for templates written for NTH."},

		// Operating
		{Env: "JSON_LOGGING", Flag: "json-logging", Default: "false", Group: groupOperate, value: boolValue{&c.JSONLogging},
			Usage: "Log JSON instead of text."},
		{Env: "LOG_LEVEL", Flag: "log-level", Default: "info", Group: groupOperate,
			value: enumValue{&c.LogLevel, []string{"debug", "info", "warn", "error"}},
			Usage: "Lowest level logged."},
		{Env: "LOG_FORMAT_VERSION", Flag: "log-format-version", Default: "1", Group: groupOperate,
			value: enumValue{&c.LogFormatVersion, []string{"1", "2"}},
			Usage: "Accepted for NTH compatibility; Lifeboat has one structured log format."},
		{Env: "ENABLE_PROMETHEUS_SERVER", Flag: "enable-prometheus-server", Default: "false", Group: groupOperate, value: boolValue{&c.EnablePrometheusServer},
			Usage: "Serve Prometheus metrics on /metrics."},
		{Env: "PROMETHEUS_SERVER_PORT", Flag: "prometheus-server-port", Default: "9092", Group: groupOperate,
			value: intValue{p: &c.PrometheusServerPort, min: 1, max: 65535},
			Usage: "Port of the metrics server."},
		{Env: "PROMETHEUS_SERVER_BIND_ADDRESS", Flag: "prometheus-server-bind-address", Group: groupOperate, Lifeboat: true,
			value: ipValue{&c.PrometheusServerBindAddress},
			Usage: "IP address the metrics server listens on (e.g. 127.0.0.1 to keep it off the network). Empty: every interface. The chart sets the node's IP for a pod on the host network."},
		{Env: "READINESS_REPORT_INTERVAL", Flag: "readiness-report-interval", Default: "0s", Group: groupOperate, Lifeboat: true,
			value: durationValue{p: &c.CheckInterval, min: time.Minute, max: 24 * time.Hour, zeroOff: true},
			Usage: "Controller mode: this often, the leader runs `lifeboat check` and publishes lifeboat_readiness_findings{namespace,reason}: workloads that could not leave a node within a Spot warning. Needs the reader role's permissions (the chart binds it when this is set). 0s: off."},
		{Env: "ENABLE_PROBES_SERVER", Flag: "enable-probes-server", Default: "true", Group: groupOperate, value: boolValue{&c.EnableProbesServer},
			Usage:      "Serve liveness and readiness probes. Readiness fails while the notice source (instance metadata, the queue) is failing.",
			NTHDefault: "false", Why: "without probes a process whose notice source fails looks healthy until the interruption it misses"},
		{Env: "PROBES_SERVER_PORT", Flag: "probes-server-port", Default: "8080", Group: groupOperate,
			value: intValue{p: &c.ProbesServerPort, min: 1, max: 65535},
			Usage: "Port of the probes server."},
		{Env: "PROBES_SERVER_BIND_ADDRESS", Flag: "probes-server-bind-address", Group: groupOperate, Lifeboat: true,
			value: ipValue{&c.ProbesServerBindAddress},
			Usage: "IP address the probes server listens on. Empty: every interface (the kubelet probes the pod's IP). The chart sets 127.0.0.1 for a pod on the host network, and its probes name that host: the kubelet, on the node, reaches it; nothing off the node does."},
		{Env: "PROBES_SERVER_ENDPOINT", Flag: "probes-server-endpoint", Default: "/healthz", Group: groupOperate, value: pathValue{&c.ProbesServerEndpoint},
			Usage: "Path of the liveness probe."},
		{Env: "EMIT_KUBERNETES_EVENTS", Flag: "emit-kubernetes-events", Default: "true", Group: groupOperate, value: boolValue{&c.EmitKubernetesEvents},
			Usage:      "Record Kubernetes Events on affected nodes (and on pods a drain cannot move), so `kubectl describe node` tells what Lifeboat did.",
			NTHDefault: "false", Why: "`kubectl describe node` is where an operator looks first; without Events it says nothing of the notice, the drain, the pods a budget held or the hand-back. They cost a few writes per episode, rate limited by client-go"},
		{Env: "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", Flag: "kubernetes-events-extra-annotations", Group: groupOperate,
			value: keyValuesValue{&c.KubernetesEventsExtraAnnotations},
			Usage: "Annotations added to every Event, as key1=value1,key2=value2."},
	}
}

// Defaulted reports whether the setting named env was left at its default: set neither by an
// environment variable nor by a flag. A Config not built by Load knows of no setting.
func (c *Config) Defaulted(env string) bool { return c.defaulted[env] }

// DefaultLeaseName is LEADER_ELECTION_LEASE_NAME's default, the Lease every release used before
// the name could be set.
const DefaultLeaseName = "lifeboat-controller"
