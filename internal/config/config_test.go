// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// env builds a lookup function from pairs.
func env(pairs ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func mustLoad(t *testing.T, args []string, lookup func(string) (string, bool)) *Loaded {
	t.Helper()
	l, err := Load(args, lookup)
	if err != nil {
		t.Fatalf("Load(%q): %v", args, err)
	}
	return l
}

func TestDefaults(t *testing.T) {
	l := mustLoad(t, nil, env())
	want := Config{
		PodNamespace: "kube-system", MetadataURL: "http://169.254.169.254",
		IgnoreDaemonSets: true, DeleteLocalData: true, PodTerminationGracePeriod: -1, NodeTerminationGracePeriod: 120,
		KubeAPIQPS: 0, KubeAPIBurst: 200, IMDSPollInterval: 500 * time.Millisecond, ASGLaunchReadyTimeout: 10 * time.Minute, UseAPIServerCache: true, TaintEffect: "NoSchedule", Workers: 10,
		WebhookHeaders: map[string]string{"Content-type": "application/json"}, WebhookTemplate: DefaultWebhookTemplate,
		EnableSpotInterruptionDraining: true, EnableScheduledEventDraining: true, MetadataTries: 3,
		CheckTagBeforeDraining: true, ManagedTag: "aws-node-termination-handler/managed",
		WaitForVolumeDetachment: true, WaitForLoadBalancerTargets: "auto", NodeCondition: true,
		CompleteLifecycleActionDelaySeconds: -1, HeartbeatInterval: -1, HeartbeatUntil: -1, RetainedDrainTimeout: 24 * time.Hour, SQSMsgVisibilityTimeoutSec: 20,
		LeaseName: DefaultLeaseName, LeaseDuration: 3 * time.Second, LeaseRenewDeadline: 2 * time.Second, LeaseRetryPeriod: 250 * time.Millisecond,
		InstanceStatusInterval: 30, InstanceImpairedThreshold: 120,
		NodeRepairDrainTimeout: 10 * time.Minute, NodeRepairAction: "mark-unhealthy", NodeRepairMaxUnhealthyPercent: 20, NodeRepairMaxParallel: 5, NodeRepairMaxPerHour: 10, NodeRepairStaleAfter: 15 * time.Minute, NodeRepairRebootWait: 10 * time.Minute, NodeRepairKarpenterRepairs: true, DeadInstanceFastPath: true, NodeCleanupInterval: time.Minute,
		LogLevel: "info", LogFormatVersion: "1", PrometheusServerPort: 9092, EnableProbesServer: true, ProbesServerPort: 8080, ProbesServerEndpoint: "/healthz", EmitKubernetesEvents: true,
		KubernetesEventsExtraAnnotations: map[string]string{},
		webhookHeadersRaw:                `{"Content-type":"application/json"}`,
	}
	got := *l.Config
	if !got.Defaulted("NODE_CONDITION") || got.Defaulted("NOT_A_SETTING") {
		t.Error("Defaulted does not say which settings were left at their defaults")
	}
	got.defaulted = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults differ:\n got %+v\nwant %+v", got, want)
	}
	for _, e := range l.Entries() {
		if e.Origin.Kind != "default" {
			t.Errorf("%s: origin %v, want default", e.Env, e.Origin)
		}
	}
	if len(l.Warnings) != 0 {
		t.Errorf("unexpected warnings: %q", l.Warnings)
	}
}

// samples holds a valid, non-default value for every setting and its canonical printed form.
var samples = map[string][2]string{
	"DRY_RUN":                                      {"true", "true"},
	"NODE_NAME":                                    {"ip-10-0-0-1.ec2.internal", "ip-10-0-0-1.ec2.internal"},
	"POD_NAME":                                     {"lifeboat-abc", "lifeboat-abc"},
	"NAMESPACE":                                    {"lifeboat", "lifeboat"},
	"CLUSTER_NAME":                                 {"prod", "prod"},
	"KUBECONFIG":                                   {"/tmp/kubeconfig", "/tmp/kubeconfig"},
	"KUBERNETES_SERVICE_HOST":                      {"10.0.0.1", "10.0.0.1"},
	"KUBERNETES_SERVICE_PORT":                      {"6443", "6443"},
	"KUBE_API_QPS":                                 {"12.5", "12.5"},
	"KUBE_API_BURST":                               {"30", "30"},
	"USE_APISERVER_CACHE":                          {"false", "false"},
	"IGNORE_DAEMON_SETS":                           {"false", "false"},
	"DELETE_LOCAL_DATA":                            {"FALSE", "false"},
	"POD_TERMINATION_GRACE_PERIOD":                 {"30", "30"},
	"NODE_TERMINATION_GRACE_PERIOD":                {"90", "90"},
	"CORDON_ONLY":                                  {"1", "true"},
	"TAINT_NODE":                                   {"True", "true"},
	"TAINT_EFFECT":                                 {"noexecute", "NoExecute"},
	"ENABLE_OUT_OF_SERVICE_TAINT":                  {"true", "true"},
	"NODE_CONDITION":                               {"false", "false"},
	"EXCLUDE_FROM_LOAD_BALANCERS":                  {"true", "true"},
	"UPTIME_FROM_FILE":                             {"/proc/uptime", "/proc/uptime"},
	"WORKERS":                                      {"3", "3"},
	"FORCE_DELETE_BEFORE_DEADLINE_SECONDS":         {"15", "15"},
	"INSTANCE_METADATA_URL":                        {"http://127.0.0.1:1338", "http://127.0.0.1:1338"},
	"METADATA_TRIES":                               {"5", "5"},
	"IMDS_POLL_INTERVAL":                           {"1s", "1s"},
	"ALLOW_IMDSV1":                                 {"true", "true"},
	"ASG_LIFECYCLE_HOOK_NAME":                      {"drain-hook", "drain-hook"},
	"ENABLE_SPOT_INTERRUPTION_DRAINING":            {"false", "false"},
	"ENABLE_SCHEDULED_EVENT_DRAINING":              {"false", "false"},
	"ENABLE_REBALANCE_MONITORING":                  {"true", "true"},
	"ENABLE_REBALANCE_DRAINING":                    {"true", "true"},
	"ENABLE_ASG_LIFECYCLE_DRAINING":                {"true", "true"},
	"ENABLE_SQS_TERMINATION_DRAINING":              {"true", "true"},
	"QUEUE_URL":                                    {"https://sqs.eu-west-1.amazonaws.com/1/q", "https://sqs.eu-west-1.amazonaws.com/1/q"},
	"AWS_REGION":                                   {"eu-west-1", "eu-west-1"},
	"QUEUE_ALLOWED_ACCOUNTS":                       {" 444455556666, 777788889999,444455556666 ", "444455556666,777788889999"},
	"ENABLE_INSTANCE_STATUS_DRAINING":              {"true", "true"},
	"INSTANCE_STATUS_INTERVAL":                     {"45", "45"},
	"INSTANCE_IMPAIRED_THRESHOLD":                  {"300", "300"},
	"SET_IMPAIRED_INSTANCE_UNHEALTHY":              {"true", "true"},
	"ENABLE_NODE_REPAIR":                           {"true", "true"},
	"NODE_REPAIR_CONDITIONS":                       {" KernelReady=False:30m, Ready=Unknown:1h ", "KernelReady=False:30m0s,Ready=Unknown:1h0m0s"},
	"NODE_REPAIR_DRAIN_TIMEOUT":                    {"15m", "15m0s"},
	"NODE_REPAIR_MAX_UNHEALTHY_PERCENT":            {"30", "30"},
	"NODE_REPAIR_MAX_PARALLEL":                     {"0", "0"},
	"NODE_REPAIR_MAX_PER_HOUR":                     {"3", "3"},
	"NODE_REPAIR_STALE_AFTER":                      {"0s", "0s"},
	"NODE_REPAIR_REBOOT_WAIT":                      {"5m", "5m0s"},
	"NODE_REPAIR_KARPENTER_REPAIRS":                {"false", "false"},
	"NODE_REPAIR_NODE_SELECTOR":                    {" team=ml,gpu in (a, b) ", "team=ml,gpu in (a, b)"},
	"NODE_REPAIR_POLICIES":                         {"[{condition: GPU, status: False, wait: 5m, action: replace}]", `[{"condition":"GPU","status":"False","wait":"5m0s","action":"replace"}]`},
	"NODE_REPAIR_EKS_AUTO_REPAIRED_NODEGROUPS":     {"ng-1,ng-2", "ng-1,ng-2"},
	"NODE_REPAIR_EKS_LOOKUP":                       {"true", "true"},
	"DELETE_NODE_AFTER_TERMINATION":                {"true", "true"},
	"NODE_CLEANUP_INTERVAL":                        {"30s", "30s"},
	"DEAD_INSTANCE_FAST_PATH":                      {"false", "false"},
	"DEAD_INSTANCE_FAST_PATH_UNREACHABLE":          {"true", "true"},
	"NODE_REPAIR_PAUSED":                           {"true", "true"},
	"NODE_REPAIR_ACTION":                           {"terminate", "terminate"},
	"AWS_ENDPOINT":                                 {"http://127.0.0.1:4566", "http://127.0.0.1:4566"},
	"CHECK_TAG_BEFORE_DRAINING":                    {"false", "false"},
	"MANAGED_TAG":                                  {"team/managed", "team/managed"},
	"USE_PROVIDER_ID":                              {"true", "true"},
	"DELETE_SQS_MSG_IF_NODE_NOT_FOUND":             {"true", "true"},
	"COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS":      {"15", "15"},
	"HEARTBEAT_INTERVAL":                           {"60", "60"},
	"ASG_LAUNCH_READY_TIMEOUT":                     {"5m", "5m0s"},
	"HEARTBEAT_UNTIL":                              {"600", "600"},
	"ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN": {"true", "true"},
	"RETAINED_DRAIN_TIMEOUT":                       {"6h", "6h0m0s"},
	"SQS_MSG_VISIBILITY_TIMEOUT_SEC":               {"60", "60"},
	"LEADER_ELECTION_LEASE_DURATION":               {"20s", "20s"},
	"LEADER_ELECTION_LEASE_NAME":                   {"trial-lifeboat-controller", "trial-lifeboat-controller"},
	"LEADER_ELECTION_RENEW_DEADLINE":               {"12s", "12s"},
	"LEADER_ELECTION_RETRY_PERIOD":                 {"2s", "2s"},
	"WEBHOOK_URL":                                  {"https://hooks.example.com/secret-token", "<redacted>"},
	"WEBHOOK_PROXY":                                {"http://user:pw@proxy:3128", "<redacted>"},
	"WEBHOOK_HEADERS":                              {`{"Authorization":"Bearer x"}`, "<redacted>"},
	"WEBHOOK_TEMPLATE":                             {`{"text":"{{ .NodeName }}"}`, `{"text":"{{ .NodeName }}"}`},
	"WEBHOOK_TEMPLATE_FILE":                        {"/etc/lifeboat/template", "/etc/lifeboat/template"},
	"JSON_LOGGING":                                 {"true", "true"},
	"LOG_LEVEL":                                    {"DEBUG", "debug"},
	"LOG_FORMAT_VERSION":                           {"2", "2"},
	"ENABLE_PROMETHEUS_SERVER":                     {"true", "true"},
	"PROMETHEUS_SERVER_PORT":                       {"9100", "9100"},
	"ENABLE_PROBES_SERVER":                         {"false", "false"},
	"PROBES_SERVER_PORT":                           {"8081", "8081"},
	"WAIT_FOR_VOLUME_DETACHMENT":                   {"false", "false"},
	"WAIT_FOR_LOAD_BALANCER_TARGETS":               {"true", "true"},
	"PROBES_SERVER_BIND_ADDRESS":                   {"127.0.0.1", "127.0.0.1"},
	"PROMETHEUS_SERVER_BIND_ADDRESS":               {" ::1 ", "::1"},
	"PROBES_SERVER_ENDPOINT":                       {"/live", "/live"},
	"EMIT_KUBERNETES_EVENTS":                       {"false", "false"},
	"READINESS_REPORT_INTERVAL":                    {"10m", "10m0s"},
	"KUBERNETES_EVENTS_EXTRA_ANNOTATIONS":          {"team=infra, owner=me", "owner=me,team=infra"},
	"WEBHOOK_NTH_KINDS":                            {"true", "true"},
}

func entry(t *testing.T, l *Loaded, name string) Entry {
	t.Helper()
	for _, e := range l.Entries() {
		if e.Env == name {
			return e
		}
	}
	t.Fatalf("no entry %s", name)
	return Entry{}
}

func TestEverySettingFromEnvAndFlag(t *testing.T) {
	all := Settings()
	if len(all) != len(samples) {
		t.Errorf("%d settings but %d samples: every setting needs a sample", len(all), len(samples))
	}
	for _, s := range all {
		sample, ok := samples[s.Env]
		if !ok {
			t.Errorf("%s has no sample value", s.Env)
			continue
		}
		t.Run(s.Env, func(t *testing.T) {
			if sample[0] == s.Default {
				t.Fatalf("sample %q equals the default", sample[0])
			}
			fromEnv := mustLoad(t, nil, env(s.Env, sample[0]))
			if e := entry(t, fromEnv, s.Env); e.Value != sample[1] || e.Origin != (Origin{"env", s.Env}) {
				t.Errorf("env: got %q from %v, want %q from env %s", e.Value, e.Origin, sample[1], s.Env)
			}
			fromFlag := mustLoad(t, []string{"--" + s.Flag + "=" + sample[0]}, env())
			if e := entry(t, fromFlag, s.Env); e.Value != sample[1] || e.Origin != (Origin{"flag", s.Flag}) {
				t.Errorf("flag: got %q from %v, want %q from flag", e.Value, e.Origin, sample[1])
			}
			// A flag wins over the env var, and one dash works as in Go's flag package.
			args := []string{"-" + s.Flag, sample[0]}
			if isBool(s) { // Go's flag package takes a bool's value only after "="
				args = []string{"-" + s.Flag + "=" + sample[0]}
			}
			both := mustLoad(t, args, env(s.Env, s.Default))
			if e := entry(t, both, s.Env); e.Origin.Kind != "flag" || e.Value != sample[1] {
				t.Errorf("flag over env: got %q from %v", e.Value, e.Origin)
			}
			if s.Flag != FlagName(s.Env) && s.Env != "NAMESPACE" && s.Env != "INSTANCE_METADATA_URL" {
				t.Errorf("flag --%s is not NTH's spelling --%s", s.Flag, FlagName(s.Env))
			}
		})
	}
}

func TestEmptyEnvIsUnset(t *testing.T) {
	l := mustLoad(t, nil, env("WORKERS", "", "DRY_RUN", "", "MANAGED_TAG", ""))
	if l.Config.Workers != 10 || l.Config.DryRun || l.Config.ManagedTag != "aws-node-termination-handler/managed" {
		t.Errorf("empty env vars changed values: %+v", l.Config)
	}
	if o := l.Origin("WORKERS"); o.Kind != "default" {
		t.Errorf("WORKERS origin %v, want default", o)
	}
}

func TestBoolFlagForms(t *testing.T) {
	for _, args := range [][]string{{"--dry-run"}, {"-dry-run"}, {"--dry-run=true"}, {"--dry-run=1"}} {
		if l := mustLoad(t, args, env()); !l.Config.DryRun {
			t.Errorf("%q: DryRun false", args)
		}
	}
	if l := mustLoad(t, []string{"--dry-run=false"}, env("DRY_RUN", "true")); l.Config.DryRun {
		t.Error("--dry-run=false did not override DRY_RUN=true")
	}
}

func TestAliases(t *testing.T) {
	tests := []struct {
		name      string
		setting   string
		args      []string
		env       []string
		check     func(*Config) bool
		origin    Origin
		warnMatch string
	}{
		{"GRACE_PERIOD env", "POD_TERMINATION_GRACE_PERIOD", nil, []string{"GRACE_PERIOD", "45"},
			func(c *Config) bool { return c.PodTerminationGracePeriod == 45 }, Origin{"env", "GRACE_PERIOD"}, "GRACE_PERIOD is deprecated; use POD_TERMINATION_GRACE_PERIOD"},
		{"both env, current wins", "POD_TERMINATION_GRACE_PERIOD", nil, []string{"GRACE_PERIOD", "45", "POD_TERMINATION_GRACE_PERIOD", "20"},
			func(c *Config) bool { return c.PodTerminationGracePeriod == 20 }, Origin{"env", "POD_TERMINATION_GRACE_PERIOD"}, "POD_TERMINATION_GRACE_PERIOD wins"},
		{"--grace-period flag", "POD_TERMINATION_GRACE_PERIOD", []string{"--grace-period=7"}, nil,
			func(c *Config) bool { return c.PodTerminationGracePeriod == 7 }, Origin{"flag", "grace-period"}, "--grace-period is deprecated"},
		{"both flags, current wins whatever the order", "POD_TERMINATION_GRACE_PERIOD", []string{"--pod-termination-grace-period=8", "--grace-period=7"}, nil,
			func(c *Config) bool { return c.PodTerminationGracePeriod == 8 }, Origin{"flag", "pod-termination-grace-period"}, "--pod-termination-grace-period wins"},
		{"CHECK_ASG_TAG_BEFORE_DRAINING", "CHECK_TAG_BEFORE_DRAINING", nil, []string{"CHECK_ASG_TAG_BEFORE_DRAINING", "false"},
			func(c *Config) bool { return !c.CheckTagBeforeDraining }, Origin{"env", "CHECK_ASG_TAG_BEFORE_DRAINING"}, "use CHECK_TAG_BEFORE_DRAINING"},
		{"MANAGED_ASG_TAG", "MANAGED_TAG", nil, []string{"MANAGED_ASG_TAG", "old/tag"},
			func(c *Config) bool { return c.ManagedTag == "old/tag" }, Origin{"env", "MANAGED_ASG_TAG"}, "use MANAGED_TAG"},
		{"--managed-asg-tag flag", "MANAGED_TAG", []string{"--managed-asg-tag", "f/tag"}, nil,
			func(c *Config) bool { return c.ManagedTag == "f/tag" }, Origin{"flag", "managed-asg-tag"}, "--managed-asg-tag is deprecated"},
		{"env alias loses to current flag", "MANAGED_TAG", []string{"--managed-tag=new"}, []string{"MANAGED_ASG_TAG", "old"},
			func(c *Config) bool { return c.ManagedTag == "new" }, Origin{"flag", "managed-tag"}, "MANAGED_ASG_TAG is deprecated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLoad(t, tt.args, env(tt.env...))
			if !tt.check(l.Config) {
				t.Errorf("value not applied: %+v", l.Config)
			}
			if o := l.Origin(tt.setting); o != tt.origin {
				t.Errorf("origin %v, want %v", o, tt.origin)
			}
			if !strings.Contains(strings.Join(l.Warnings, "\n"), tt.warnMatch) {
				t.Errorf("warnings %q lack %q", l.Warnings, tt.warnMatch)
			}
		})
	}
}

func TestBadValues(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"WORKERS", "abc", `WORKERS="abc": not an integer`},
		{"WORKERS", "0", `WORKERS="0": out of range (allowed: 1 to 10000)`},
		{"DRY_RUN", "yes", `DRY_RUN="yes": not a boolean (use true or false)`},
		{"IGNORE_DAEMON_SETS", "maybe", `IGNORE_DAEMON_SETS="maybe": not a boolean`},
		{"KUBE_API_QPS", "fast", `KUBE_API_QPS="fast": not a number`},
		{"KUBE_API_QPS", "-1", `KUBE_API_QPS="-1": must be 0 (automatic) or greater than 0`},
		{"KUBE_API_BURST", "-3", `KUBE_API_BURST="-3": out of range (allowed: 1 or more)`},
		{"POD_TERMINATION_GRACE_PERIOD", "-5", `POD_TERMINATION_GRACE_PERIOD="-5": out of range (allowed: -1 (off) or 0 or more)`},
		{"GRACE_PERIOD", "x", `GRACE_PERIOD="x": not an integer`},
		{"NODE_TERMINATION_GRACE_PERIOD", "-1", `NODE_TERMINATION_GRACE_PERIOD="-1": out of range`},
		{"TAINT_EFFECT", "Never", `TAINT_EFFECT="Never": not one of NoSchedule, PreferNoSchedule, NoExecute`},
		{"INSTANCE_METADATA_URL", "169.254.169.254", `INSTANCE_METADATA_URL="169.254.169.254": not an absolute http or https URL`},
		{"METADATA_TRIES", "0", `METADATA_TRIES="0": out of range (allowed: 1 to 100)`},
		{"IMDS_POLL_INTERVAL", "500", `IMDS_POLL_INTERVAL="500": not a duration`},
		{"IMDS_POLL_INTERVAL", "10ms", `IMDS_POLL_INTERVAL="10ms": out of range (allowed: 100ms to 1m0s)`},
		{"READINESS_REPORT_INTERVAL", "30s", `READINESS_REPORT_INTERVAL="30s": out of range (allowed: 0s for off, or 1m0s to 24h0m0s)`},
		{"QUEUE_URL", "ftp://queue", `QUEUE_URL="ftp://queue": not an absolute http or https URL`},
		{"QUEUE_ALLOWED_ACCOUNTS", "444455556666,12345", `QUEUE_ALLOWED_ACCOUNTS="444455556666,12345": "12345" is not an AWS account id (12 digits)`},
		{"QUEUE_ALLOWED_ACCOUNTS", "arn:aws:iam::444455556666:root", `QUEUE_ALLOWED_ACCOUNTS="arn:aws:iam::444455556666:root": "arn:aws:iam::444455556666:root" is not an AWS account id (12 digits)`},
		{"AWS_ENDPOINT", "localhost:4566", `AWS_ENDPOINT="localhost:4566": not an absolute http or https URL`},
		{"RETAINED_DRAIN_TIMEOUT", "1s", `RETAINED_DRAIN_TIMEOUT="1s": out of range (allowed: 10s to 168h0m0s)`},
		{"HEARTBEAT_INTERVAL", "10", `HEARTBEAT_INTERVAL="10": out of range (allowed: -1 (off) or 30 to 3600)`},
		{"HEARTBEAT_UNTIL", "200000", `HEARTBEAT_UNTIL="200000": out of range (allowed: -1 (off) or 60 to 172800)`},
		{"SQS_MSG_VISIBILITY_TIMEOUT_SEC", "120", `SQS_MSG_VISIBILITY_TIMEOUT_SEC="120": out of range (allowed: 1 to 119)`},
		{"COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS", "-2", `COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS="-2": out of range`},
		{"FORCE_DELETE_BEFORE_DEADLINE_SECONDS", "-1", `FORCE_DELETE_BEFORE_DEADLINE_SECONDS="-1": out of range (allowed: 0 to 3600)`},
		{"WEBHOOK_URL", "not a url", `WEBHOOK_URL="<redacted>": not an absolute http or https URL`},
		{"WEBHOOK_HEADERS", `["a"]`, `WEBHOOK_HEADERS="<redacted>": not a JSON object of strings`},
		{"WEBHOOK_TEMPLATE", `{{ .Kind `, `WEBHOOK_TEMPLATE="{{ .Kind ": not a valid Go template`},
		{"LOG_LEVEL", "verbose", `LOG_LEVEL="verbose": not one of debug, info, warn, error`},
		{"LOG_FORMAT_VERSION", "3", `LOG_FORMAT_VERSION="3": not one of 1, 2`},
		{"PROMETHEUS_SERVER_PORT", "70000", `PROMETHEUS_SERVER_PORT="70000": out of range (allowed: 1 to 65535)`},
		{"PROBES_SERVER_PORT", "http", `PROBES_SERVER_PORT="http": not an integer`},
		{"PROBES_SERVER_BIND_ADDRESS", "localhost", `PROBES_SERVER_BIND_ADDRESS="localhost": not an IP address`},
		{"PROBES_SERVER_ENDPOINT", "healthz", `PROBES_SERVER_ENDPOINT="healthz": not an HTTP path starting with /`},
		{"KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", "a=b,c", `KUBERNETES_EVENTS_EXTRA_ANNOTATIONS="a=b,c": "c" is not key=value`},
		{"KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", "a=b,bad key=c", `KUBERNETES_EVENTS_EXTRA_ANNOTATIONS="a=b,bad key=c": "bad key" is not a valid annotation key`},
		{"KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", "example.com/=x", `KUBERNETES_EVENTS_EXTRA_ANNOTATIONS="example.com/=x": "example.com/" is not a valid annotation key`},
		{"KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", "a/b/c=x", `KUBERNETES_EVENTS_EXTRA_ANNOTATIONS="a/b/c=x": "a/b/c" is not a valid annotation key`},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := Load(nil, env(tt.name, tt.value))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("got %v, want a config error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
			// The same value given as a flag is reported under the flag's name.
			flagName := FlagName(tt.name)
			for _, s := range Settings() {
				if s.Env == tt.name {
					flagName = s.Flag
				}
			}
			_, err = Load([]string{"--" + flagName + "=" + tt.value}, env())
			wantFlag := "--" + flagName + "=" + strings.TrimPrefix(tt.want, tt.name+"=")
			if err == nil || !strings.Contains(err.Error(), wantFlag) {
				t.Errorf("flag error %v lacks %q", err, wantFlag)
			}
		})
	}
}

func TestSecretsNeverEchoed(t *testing.T) {
	const secret = "https://hooks.example.com/T000/very-secret"
	l := mustLoad(t, nil, env("WEBHOOK_URL", secret, "WEBHOOK_HEADERS", `{"X-Token":"hunter2"}`))
	var b strings.Builder
	if err := l.Print(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"very-secret", "hunter2"} {
		if strings.Contains(b.String(), s) {
			t.Errorf("printed configuration contains %q:\n%s", s, b.String())
		}
	}
	if l.Config.WebhookURL != secret || l.Config.WebhookHeaders["X-Token"] != "hunter2" {
		t.Error("secret values not stored")
	}
}

func TestAllProblemsReportedTogether(t *testing.T) {
	_, err := Load([]string{"--metadata-tries=x"}, env("WORKERS", "abc", "DRY_RUN", "perhaps"))
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 3 {
		t.Fatalf("got %v, want three problems", err)
	}
}

func TestArgumentErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"--workers"}, "flag needs an argument: -workers"},
		{[]string{"stray"}, `unexpected argument "stray"`},
	} {
		if _, err := Load(tt.args, env()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) = %v, want %q", tt.args, err, tt.want)
		}
	}
	if _, err := Load([]string{"--help"}, env()); !errors.Is(err, ErrHelp) {
		t.Errorf("--help: got %v, want ErrHelp", err)
	}
}

func TestValidate(t *testing.T) {
	tmpl := filepath.Join(t.TempDir(), "tmpl")
	if err := os.WriteFile(tmpl, []byte(`{"node":"{{ .NodeName }}"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	badTmpl := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(badTmpl, []byte(`{{ if }}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		mode    Mode
		env     []string
		wantErr string // "" = valid
		check   func(*Config) bool
	}{
		{"agent needs NODE_NAME", ModeAgent, nil, "NODE_NAME is required in agent mode", nil},
		{"agent ok", ModeAgent, []string{"NODE_NAME", "n1"}, "", nil},
		{"controller needs QUEUE_URL", ModeController, nil, "QUEUE_URL is required in controller mode", nil},
		{"region from queue URL", ModeController, []string{"QUEUE_URL", "https://sqs.ap-southeast-2.amazonaws.com/123/q"}, "",
			func(c *Config) bool { return c.AWSRegion == "ap-southeast-2" }},
		{"AWS_REGION wins over queue URL", ModeController, []string{"QUEUE_URL", "https://sqs.ap-southeast-2.amazonaws.com/123/q", "AWS_REGION", "us-west-2"}, "",
			func(c *Config) bool { return c.AWSRegion == "us-west-2" }},
		{"no region anywhere", ModeController, []string{"QUEUE_URL", "http://127.0.0.1:4100/000/q"}, `AWS_REGION is unset and QUEUE_URL="http://127.0.0.1:4100/000/q" names no region`, nil},
		{"renew deadline past the lease", ModeController, []string{"QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123/q", "LEADER_ELECTION_LEASE_DURATION", "10s", "LEADER_ELECTION_RENEW_DEADLINE", "10s"},
			"LEADER_ELECTION_RENEW_DEADLINE=10s must be less than LEADER_ELECTION_LEASE_DURATION=10s", nil},
		{"retry period past the renew deadline", ModeController, []string{"QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123/q", "LEADER_ELECTION_RENEW_DEADLINE", "2s", "LEADER_ELECTION_RETRY_PERIOD", "2s"},
			"LEADER_ELECTION_RENEW_DEADLINE=2s must be more than 1.2 × LEADER_ELECTION_RETRY_PERIOD=2s", nil},
		{"bad region", ModeController, []string{"QUEUE_URL", "http://127.0.0.1:4100/000/q", "AWS_REGION", "mars"}, `AWS_REGION="mars": not a region name`, nil},
		{"empty managed tag", ModeAgent, []string{"NODE_NAME", "n", "MANAGED_TAG", " "}, "MANAGED_TAG is empty while CHECK_TAG_BEFORE_DRAINING=true", nil},
		{"heartbeat until without interval", ModeAgent, []string{"NODE_NAME", "n", "HEARTBEAT_UNTIL", "600"}, "HEARTBEAT_UNTIL=600 needs HEARTBEAT_INTERVAL", nil},
		{"heartbeat interval defaults until", ModeAgent, []string{"NODE_NAME", "n", "HEARTBEAT_INTERVAL", "60"}, "",
			func(c *Config) bool { return c.HeartbeatUntil == 172800 }},
		{"heartbeat interval above until", ModeAgent, []string{"NODE_NAME", "n", "HEARTBEAT_INTERVAL", "600", "HEARTBEAT_UNTIL", "300"}, "HEARTBEAT_INTERVAL=600 must be less than HEARTBEAT_UNTIL=300", nil},
		{"template file read", ModeAgent, []string{"NODE_NAME", "n", "WEBHOOK_TEMPLATE_FILE", tmpl}, "",
			func(c *Config) bool { return c.WebhookTemplate == `{"node":"{{ .NodeName }}"}` }},
		{"template file missing", ModeAgent, []string{"NODE_NAME", "n", "WEBHOOK_TEMPLATE_FILE", "/nonexistent/t"}, `WEBHOOK_TEMPLATE_FILE="/nonexistent/t": no such file or directory`, nil},
		{"template file broken", ModeAgent, []string{"NODE_NAME", "n", "WEBHOOK_TEMPLATE_FILE", badTmpl}, "not a valid Go template", nil},
		{"EKS lookup needs the cluster's name", ModeController, []string{"QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123/q", "ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_EKS_LOOKUP", "true"},
			"NODE_REPAIR_EKS_LOOKUP asks EKS about a node's managed node group in the cluster CLUSTER_NAME names, and CLUSTER_NAME is unset", nil},
		{"EKS lookup with the cluster's name", ModeController, []string{"QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123/q", "ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_EKS_LOOKUP", "true", "CLUSTER_NAME", "prod"}, "",
			func(c *Config) bool { return c.NodeRepairEKSLookup }},
		{"port clash", ModeAgent, []string{"NODE_NAME", "n", "ENABLE_PROMETHEUS_SERVER", "true", "ENABLE_PROBES_SERVER", "true", "PROBES_SERVER_PORT", "9092"}, "both 9092", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLoad(t, nil, env(tt.env...))
			err := l.Validate(tt.mode)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
			if tt.check != nil && !tt.check(l.Config) {
				t.Errorf("derived values wrong: %+v", l.Config)
			}
		})
	}
}

func TestAgentWithAbandonWarns(t *testing.T) {
	l := mustLoad(t, nil, env("NODE_NAME", "n1", "ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN", "true"))
	if err := l.Validate(ModeAgent); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(l.Warnings, "\n"), "ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN has no effect in agent mode") {
		t.Errorf("no ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN warning in %q", l.Warnings)
	}
	l = mustLoad(t, nil, env("ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/q", "ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN", "true"))
	if err := l.Validate(ModeController); err != nil || strings.Contains(strings.Join(l.Warnings, "\n"), "ABANDON") {
		t.Errorf("controller mode: err %v, warnings %q; want no warning about it", err, l.Warnings)
	}
}

func TestAgentWithHeartbeatsWarns(t *testing.T) {
	l := mustLoad(t, nil, env("NODE_NAME", "n1", "HEARTBEAT_INTERVAL", "60"))
	if err := l.Validate(ModeAgent); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(l.Warnings, "\n"), "HEARTBEAT_INTERVAL has no effect in agent mode") {
		t.Errorf("no HEARTBEAT_INTERVAL warning in %q", l.Warnings)
	}
	l = mustLoad(t, nil, env("NODE_NAME", "n1"))
	if err := l.Validate(ModeAgent); err != nil || len(l.Warnings) != 0 {
		t.Errorf("err %v, warnings %q; want neither", err, l.Warnings)
	}
}

func TestControllerWithoutClusterNameWarns(t *testing.T) {
	l := mustLoad(t, nil, env("QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q"))
	if err := l.Validate(ModeController); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(l.Warnings, "\n"), "CLUSTER_NAME is unset") {
		t.Errorf("no CLUSTER_NAME warning in %q", l.Warnings)
	}
	l = mustLoad(t, nil, env("QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/q", "CLUSTER_NAME", "prod"))
	if err := l.Validate(ModeController); err != nil || len(l.Warnings) != 0 {
		t.Errorf("err %v, warnings %q; want neither", err, l.Warnings)
	}
}

// A queue URL without an account turns the message account check off: said at start.
func TestQueueURLWithoutAccountWarns(t *testing.T) {
	l := mustLoad(t, nil, env("QUEUE_URL", "http://127.0.0.1:9324/queue/lifeboat", "AWS_REGION", "us-east-1", "CLUSTER_NAME", "prod"))
	if err := l.Validate(ModeController); err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(l.Warnings, "\n"); !strings.Contains(w, `QUEUE_URL="http://127.0.0.1:9324/queue/lifeboat" names no AWS account`) {
		t.Errorf("no warning about the queue's account in %q", l.Warnings)
	}
}

func TestAccountFromQueueURL(t *testing.T) {
	for url, want := range map[string]string{
		"https://sqs.us-east-1.amazonaws.com/123456789012/lifeboat":         "123456789012",
		"https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q/":           "123456789012",
		"https://vpce-1a2b.sqs.us-east-1.vpce.amazonaws.com/123456789012/q": "123456789012",
		"http://127.0.0.1:4100/000000000000/lifeboat":                       "000000000000",
		"http://us-east-1.localhost:4100/100010001000/lifeboat":             "100010001000",
		"http://127.0.0.1:9324/queue/lifeboat":                              "",
		"http://127.0.0.1:4100/000/q":                                       "",
		"https://sqs.us-east-1.amazonaws.com/123456789012":                  "",
		"https://sqs.us-east-1.amazonaws.com/123456789012/q/extra":          "",
		"https://sqs.us-east-1.amazonaws.com/":                              "",
		"https://sqs.us-east-1.amazonaws.com/12345678901a/q":                "",
		"https://sqs.us-east-1.amazonaws.com/1234567890123/q":               "",
	} {
		if got := AccountFromQueueURL(url); got != want {
			t.Errorf("AccountFromQueueURL(%q) = %q, want %q", url, got, want)
		}
	}
}

func TestRegionFromQueueURL(t *testing.T) {
	for url, want := range map[string]string{
		"https://sqs.us-east-1.amazonaws.com/123456789012/q":     "us-east-1",
		"https://sqs.us-gov-west-1.amazonaws.com/1/q":            "us-gov-west-1",
		"https://sqs.cn-north-1.amazonaws.com.cn/1/q":            "cn-north-1",
		"https://eu-central-1.queue.amazonaws.com/1/q":           "eu-central-1",
		"http://us-east-1.localhost:4100/100010001000/lifeboat":  "us-east-1",
		"https://sqs-fips.us-east-1.amazonaws.com/1/q":           "",
		"http://127.0.0.1:4100/000/q":                            "",
		"https://vpce-1a2b.sqs.us-east-1.vpce.amazonaws.com/1/q": "",
	} {
		if got := RegionFromQueueURL(url); got != want {
			t.Errorf("RegionFromQueueURL(%q) = %q, want %q", url, got, want)
		}
	}
}

func TestModeFromEnv(t *testing.T) {
	if m := mustLoad(t, nil, env()).Config.ModeFromEnv(); m != ModeAgent {
		t.Errorf("default mode %s, want agent", m)
	}
	if m := mustLoad(t, nil, env("ENABLE_SQS_TERMINATION_DRAINING", "true")).Config.ModeFromEnv(); m != ModeController {
		t.Errorf("mode %s, want controller", m)
	}
}

func TestDifferencesFromNTHAreExplained(t *testing.T) {
	for _, s := range Settings() {
		if (s.NTHDefault != "" || s.Why != "") && (s.Why == "" || s.NTHDefault == s.Default) {
			t.Errorf("%s: a difference from NTH needs both NTHDefault (differing) and Why", s.Env)
		}
		if s.Usage == "" || s.Group == "" {
			t.Errorf("%s: missing usage or group", s.Env)
		}
	}
}

func FuzzLoadEnv(f *testing.F) {
	for _, s := range Settings() {
		f.Add(s.Env, s.Default)
		if v, ok := samples[s.Env]; ok {
			f.Add(s.Env, v[0])
		}
	}
	f.Add("WORKERS", "99999999999999999999")
	f.Fuzz(func(t *testing.T, name, value string) {
		l, err := Load(nil, env(name, value))
		if err != nil {
			var cerr *Error
			if !errors.As(err, &cerr) || len(cerr.Problems) == 0 {
				t.Fatalf("error %v is not a config.Error with problems", err)
			}
			if !strings.Contains(err.Error(), name+"=") {
				t.Fatalf("error %q does not name %s", err, name)
			}
			return
		}
		_ = l.Validate(ModeAgent)
		_ = l.Validate(ModeController)
		var b strings.Builder
		if err := l.Print(&b); err != nil {
			t.Fatal(err)
		}
	})
}

// LoadOnly reads the named settings and nothing else: another setting's bad value cannot stop
// it, and keeps its default.
func TestLoadOnly(t *testing.T) {
	env := map[string]string{"WORKERS": "abc", "IGNORE_DAEMON_SETS": "false", "CORDON_ONLY": "true"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	l, err := LoadOnly([]string{"IGNORE_DAEMON_SETS"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.IgnoreDaemonSets || l.Config.Workers != 10 || l.Config.CordonOnly {
		t.Errorf("got IgnoreDaemonSets %v, Workers %d, CordonOnly %v; want false, the default 10, the default false",
			l.Config.IgnoreDaemonSets, l.Config.Workers, l.Config.CordonOnly)
	}
	env["IGNORE_DAEMON_SETS"] = "maybe"
	if _, err := LoadOnly([]string{"IGNORE_DAEMON_SETS"}, lookup); err == nil || !strings.Contains(err.Error(), "IGNORE_DAEMON_SETS") {
		t.Errorf("a named setting's bad value: %v", err)
	}
}
