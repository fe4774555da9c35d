// SPDX-License-Identifier: Apache-2.0

// Package config reads Lifeboat's configuration. It accepts every variable of
// aws-node-termination-handler (NTH) under the same environment names and flags, so an NTH
// deployment can switch without edits, and adds a few settings of its own.
//
// Precedence, lowest first: default, deprecated env alias, env var, deprecated flag alias,
// flag. An empty env var counts as unset. Every value goes through the same parser whatever
// its origin, and all problems are reported together, each naming the input.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
)

// Mode is how Lifeboat runs.
type Mode string

const (
	ModeAgent      Mode = "agent"      // one node, notices from instance metadata (NTH's IMDS mode)
	ModeController Mode = "controller" // the whole cluster, notices from a queue (NTH's queue-processor mode)
)

// Origin says where an effective value came from.
type Origin struct {
	Kind string // "default", "env" or "flag"
	Name string // the variable or flag that set it
}

func (o Origin) String() string {
	switch o.Kind {
	case "env":
		return "env " + o.Name
	case "flag":
		return "flag --" + o.Name
	}
	return "default"
}

// Loaded is a parsed configuration together with where each value came from.
type Loaded struct {
	Config   *Config
	Warnings []string

	settings []*Setting
	origins  map[string]Origin // by Setting.Env
}

// Error lists every problem found in the configuration, one per line.
type Error struct{ Problems []string }

func (e *Error) Error() string { return strings.Join(e.Problems, "\n") }

// ErrHelp is returned when the arguments ask for usage text.
var ErrHelp = flag.ErrHelp

// Load parses args (flags only; the sub-command is already removed) and the environment.
// lookupEnv is os.LookupEnv outside tests.
func Load(args []string, lookupEnv func(string) (string, bool)) (*Loaded, error) {
	return load(args, lookupEnv, nil)
}

// LoadOnly reads only the named settings (by Setting.Env) from the environment; every other
// setting keeps its default, whatever the environment says. The read-only commands use it, so
// that a setting they never use cannot stop them.
func LoadOnly(envs []string, lookupEnv func(string) (string, bool)) (*Loaded, error) {
	only := map[string]bool{}
	for _, e := range envs {
		only[e] = true
	}
	return load(nil, lookupEnv, only)
}

func load(args []string, lookupEnv func(string) (string, bool), only map[string]bool) (*Loaded, error) {
	c := &Config{}
	l := &Loaded{Config: c, settings: settings(c), origins: map[string]Origin{}}
	problems := l.applyDefaults()
	problems = append(problems, l.applyEnv(lookupEnv, only)...)
	flagProblems, err := l.applyFlags(args)
	if err != nil {
		return nil, err
	}
	problems = append(problems, flagProblems...)
	sort.Strings(l.Warnings)
	c.defaulted = map[string]bool{}
	for env, o := range l.origins {
		if o.Kind == "default" {
			c.defaulted[env] = true
		}
	}

	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return l, nil
}

// applyDefaults sets every setting to its default, the lowest precedence.
func (l *Loaded) applyDefaults() (problems []string) {
	for _, s := range l.settings {
		if err := s.value.Set(s.Default); err != nil {
			// A broken default is a programming error; the tests guard against it.
			problems = append(problems, fmt.Sprintf("built-in default of %s=%q: %v", s.Env, s.Default, err))
		}
		l.origins[s.Env] = Origin{Kind: "default"}
	}
	return problems
}

// applyEnv reads the environment (only the settings in only, when it is not nil). Deprecated
// aliases come first so the current name wins when both are set.
func (l *Loaded) applyEnv(lookupEnv func(string) (string, bool), only map[string]bool) (problems []string) {
	for _, s := range l.settings {
		if only != nil && !only[s.Env] {
			continue
		}
		names := append(append([]string{}, s.Aliases...), s.Env)
		var used []string
		for _, name := range names {
			raw, ok := lookupEnv(name)
			if !ok || raw == "" {
				continue
			}
			if err := s.value.Set(raw); err != nil {
				problems = append(problems, fmt.Sprintf("%s=%q: %v", name, redactIf(s, raw), err))
				continue
			}
			l.origins[s.Env] = Origin{Kind: "env", Name: name}
			used = append(used, name)
		}
		l.warnAliases(s, used, "")
	}
	return problems
}

// flagUse is one flag as given on the command line.
type flagUse struct {
	setting *Setting
	name    string
	raw     string
	alias   bool
}

// applyFlags applies the flags in args over the environment: aliases before current names,
// each group in command-line order. The error, when not nil, ends the load at once (usage
// asked for, or a flag that cannot be parsed).
func (l *Loaded) applyFlags(args []string) (problems []string, err error) {
	uses, rest, err := l.parseFlags(args)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		problems = append(problems, fmt.Sprintf("unexpected argument %q (settings are flags such as --workers=5)", rest[0]))
	}
	sort.SliceStable(uses, func(i, j int) bool { return uses[i].alias && !uses[j].alias })
	flagNames := map[*Setting][]string{}
	for _, u := range uses {
		if err := u.setting.value.Set(u.raw); err != nil {
			problems = append(problems, fmt.Sprintf("--%s=%q: %v", u.name, redactIf(u.setting, u.raw), err))
			continue
		}
		l.origins[u.setting.Env] = Origin{Kind: "flag", Name: u.name}
		flagNames[u.setting] = append(flagNames[u.setting], u.name)
	}
	for s, names := range flagNames {
		l.warnAliases(s, names, "--")
	}
	return problems, nil
}

// parseFlags records the flags in args in command-line order, without applying them, and
// returns the arguments left after them.
func (l *Loaded) parseFlags(args []string) (uses []flagUse, rest []string, err error) {
	fs := flag.NewFlagSet("lifeboat", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, s := range l.settings {
		names := []string{s.Flag}
		for _, a := range s.Aliases {
			names = append(names, FlagName(a))
		}
		for i, name := range names {
			fs.Var(&recorder{isBool: isBool(s), record: func(raw string) {
				uses = append(uses, flagUse{setting: s, name: name, raw: raw, alias: i > 0})
			}}, name, s.Usage)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, ErrHelp
		}
		return nil, nil, &Error{Problems: []string{err.Error()}}
	}
	return uses, fs.Args(), nil
}

func (l *Loaded) warnAliases(s *Setting, used []string, prefix string) {
	current := s.Env
	if prefix != "" {
		current = s.Flag
	}
	for _, name := range used {
		if name == current {
			continue
		}
		msg := fmt.Sprintf("%s%s is deprecated; use %s%s", prefix, name, prefix, current)
		if len(used) > 1 && used[len(used)-1] == current {
			msg += fmt.Sprintf(" (both are set; %s%s wins)", prefix, current)
		}
		l.Warnings = append(l.Warnings, msg)
	}
}

// recorder is the flag.Value registered for each flag name; it only records, so that all
// flags are parsed by the same code as env vars and every bad value is reported.
type recorder struct {
	isBool bool
	record func(string)
}

func (r *recorder) Set(raw string) error { r.record(raw); return nil }
func (r *recorder) String() string       { return "" }
func (r *recorder) IsBoolFlag() bool     { return r.isBool }

func isBool(s *Setting) bool {
	b, ok := s.value.(boolFlag)
	return ok && b.IsBoolFlag()
}

// FlagName is NTH's flag spelling of an environment variable: lower kebab case.
func FlagName(env string) string { return strings.ToLower(strings.ReplaceAll(env, "_", "-")) }

// WaitsForTargets reports whether the mode waits for load-balancer targets to drain before
// handing an instance back (WAIT_FOR_LOAD_BALANCER_TARGETS; auto: the controller does, an
// agent does not, since it has no AWS credentials by default).
func (c *Config) WaitsForTargets(mode Mode) bool {
	switch c.WaitForLoadBalancerTargets {
	case "true":
		return true
	case "auto":
		return mode == ModeController
	}
	return false
}

// ModeFromEnv picks the mode the way NTH does when no sub-command names it.
func (c *Config) ModeFromEnv() Mode {
	if c.EnableSQSTerminationDraining {
		return ModeController
	}
	return ModeAgent
}

var (
	regionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)
	// Queue hosts name their region as sqs.<region>.amazonaws.com[.cn], the legacy
	// <region>.queue.amazonaws.com, or (local SQS servers) <region>.<host>.
	queueHostRegion = regexp.MustCompile(`^(?:sqs[.-])?([a-z]{2}(?:-[a-z]+)+-\d+)\.`)
)

// RegionFromQueueURL returns the region a queue URL names, or "".
func RegionFromQueueURL(queueURL string) string {
	host := queueURL
	if _, after, ok := strings.Cut(host, "://"); ok {
		host = after
	}
	host, _, _ = strings.Cut(host, "/")
	if m := queueHostRegion.FindStringSubmatch(strings.ToLower(host)); m != nil {
		return m[1]
	}
	return ""
}

// AccountFromQueueURL returns the AWS account a queue URL names (its path is
// /<account>/<queue>, at AWS as on local servers such as goaws), or "".
func AccountFromQueueURL(queueURL string) string {
	path := queueURL
	if _, after, ok := strings.Cut(path, "://"); ok {
		path = after
	}
	_, path, _ = strings.Cut(path, "/")
	account, queue, ok := strings.Cut(strings.TrimSuffix(path, "/"), "/")
	if !ok || queue == "" || strings.Contains(queue, "/") || !IsAccountID(account) {
		return ""
	}
	return account
}

// IsAccountID reports whether s is an AWS account id: 12 digits.
func IsAccountID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Validate checks what depends on more than one setting, for the given mode, and fills in
// values derived from others (the region from the queue URL, the heartbeat limit).
func (l *Loaded) Validate(mode Mode) error {
	var problems []string
	switch mode {
	case ModeAgent:
		problems = l.validateAgent()
	case ModeController:
		problems = l.validateController()
	default:
		problems = append(problems, fmt.Sprintf("unknown mode %q", mode))
	}
	c := l.Config
	problems = append(problems, c.regionProblems()...)
	problems = append(problems, c.managedTagProblems()...)
	problems = append(problems, c.validateHeartbeats()...)
	problems = append(problems, c.readTemplateFile()...)
	problems = append(problems, l.validateInstanceStatus(mode)...)
	problems = append(problems, validateNodeRepair(l, mode)...)
	problems = append(problems, c.portProblems()...)
	if len(problems) > 0 {
		return &Error{Problems: problems}
	}
	return nil
}

// validateAgent checks the settings an agent needs, and warns of those it ignores.
func (l *Loaded) validateAgent() (problems []string) {
	c := l.Config
	if c.NodeName == "" {
		problems = append(problems, "NODE_NAME is required in agent mode: the node to protect (set it from the Downward API, spec.nodeName)")
	}
	if c.WaitForLoadBalancerTargets == "true" && c.AWSRegion == "" {
		problems = append(problems, "WAIT_FOR_LOAD_BALANCER_TARGETS=true in agent mode needs AWS_REGION (and AWS credentials allowed elasticloadbalancing:DescribeTargetGroups and DescribeTargetHealth)")
	}
	if c.HeartbeatInterval != -1 {
		l.Warnings = append(l.Warnings, "HEARTBEAT_INTERVAL has no effect in agent mode: the agent sends no lifecycle heartbeats, so keep NODE_TERMINATION_GRACE_PERIOD below the lifecycle hook's heartbeat timeout")
	}
	if c.AbandonOnIncompleteDrain {
		l.Warnings = append(l.Warnings, "ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN has no effect in agent mode: the agent completes its termination hook with CONTINUE (ASG_LIFECYCLE_HOOK_NAME), and never terminates its own instance; use controller mode to leave incomplete drains to the group's retention")
	}
	return problems
}

// validateController checks the queue settings, takes the region from the queue URL when
// AWS_REGION is unset, and warns of settings that leave the controller trusting too much.
func (l *Loaded) validateController() (problems []string) {
	c := l.Config
	if c.QueueURL == "" {
		problems = append(problems, "QUEUE_URL is required in controller mode (ENABLE_SQS_TERMINATION_DRAINING=true)")
	} else if c.AWSRegion == "" {
		if r := RegionFromQueueURL(c.QueueURL); r != "" {
			c.AWSRegion = r
			l.origins["AWS_REGION"] = Origin{Kind: "env", Name: "QUEUE_URL"}
		} else {
			problems = append(problems, fmt.Sprintf("AWS_REGION is unset and QUEUE_URL=%q names no region: set AWS_REGION", c.QueueURL))
		}
	}
	if c.QueueURL != "" && AccountFromQueueURL(c.QueueURL) == "" {
		l.Warnings = append(l.Warnings, fmt.Sprintf("QUEUE_URL=%q names no AWS account (its path is not /<12-digit account>/<queue>): messages are accepted from any account", c.QueueURL))
	}
	problems = append(problems, c.leaseProblems()...)
	if c.ClusterName == "" {
		l.Warnings = append(l.Warnings, "CLUSTER_NAME is unset: instances are not checked for this cluster's kubernetes.io/cluster/<name> tag, so a queue shared with another cluster could make Lifeboat act on a node of the same name there; set CLUSTER_NAME")
	}
	return problems
}

func (c *Config) regionProblems() []string {
	if c.AWSRegion != "" && !regionPattern.MatchString(c.AWSRegion) {
		return []string{fmt.Sprintf("AWS_REGION=%q: not a region name such as us-east-1", c.AWSRegion)}
	}
	return nil
}

func (c *Config) managedTagProblems() []string {
	if c.CheckTagBeforeDraining && strings.TrimSpace(c.ManagedTag) == "" {
		return []string{"MANAGED_TAG is empty while CHECK_TAG_BEFORE_DRAINING=true: name the tag key, or set CHECK_TAG_BEFORE_DRAINING=false"}
	}
	return nil
}

// leaseProblems checks the Lease's timings together, as the leader election needs them: the
// leader stops its work (at the renew deadline) before the Lease runs out, and retries
// (jittered up to 2.2 times the period) within its deadline.
func (c *Config) leaseProblems() (problems []string) {
	if c.LeaseRenewDeadline >= c.LeaseDuration {
		problems = append(problems, fmt.Sprintf("LEADER_ELECTION_RENEW_DEADLINE=%s must be less than LEADER_ELECTION_LEASE_DURATION=%s", c.LeaseRenewDeadline, c.LeaseDuration))
	}
	if float64(c.LeaseRenewDeadline) <= 1.2*float64(c.LeaseRetryPeriod) {
		problems = append(problems, fmt.Sprintf("LEADER_ELECTION_RENEW_DEADLINE=%s must be more than 1.2 × LEADER_ELECTION_RETRY_PERIOD=%s", c.LeaseRenewDeadline, c.LeaseRetryPeriod))
	}
	return problems
}

// validateHeartbeats checks the heartbeat settings together, and gives HEARTBEAT_UNTIL its
// default when heartbeats are on: the limit depends on whether there are any.
func (c *Config) validateHeartbeats() (problems []string) {
	if c.HeartbeatUntil != -1 && c.HeartbeatInterval == -1 {
		problems = append(problems, fmt.Sprintf("HEARTBEAT_UNTIL=%d needs HEARTBEAT_INTERVAL (30 to 3600)", c.HeartbeatUntil))
	}
	if c.HeartbeatInterval != -1 {
		if c.HeartbeatUntil == -1 {
			c.HeartbeatUntil = 172800
		}
		if c.HeartbeatInterval >= c.HeartbeatUntil {
			problems = append(problems, fmt.Sprintf("HEARTBEAT_INTERVAL=%d must be less than HEARTBEAT_UNTIL=%d", c.HeartbeatInterval, c.HeartbeatUntil))
		}
	}
	return problems
}

// readTemplateFile reads WEBHOOK_TEMPLATE_FILE, when set, into WEBHOOK_TEMPLATE, checked as
// the setting itself is.
func (c *Config) readTemplateFile() []string {
	if c.WebhookTemplateFile == "" {
		return nil
	}
	body, err := os.ReadFile(c.WebhookTemplateFile)
	if err != nil {
		return []string{fmt.Sprintf("WEBHOOK_TEMPLATE_FILE=%q: %v", c.WebhookTemplateFile, errors.Unwrap(err))}
	}
	if err := (templateValue{&c.WebhookTemplate}).Set(string(body)); err != nil {
		return []string{fmt.Sprintf("WEBHOOK_TEMPLATE_FILE=%q: %v", c.WebhookTemplateFile, err)}
	}
	return nil
}

func (c *Config) portProblems() []string {
	if c.EnablePrometheusServer && c.EnableProbesServer && c.PrometheusServerPort == c.ProbesServerPort {
		return []string{fmt.Sprintf("PROMETHEUS_SERVER_PORT and PROBES_SERVER_PORT are both %d: choose two ports", c.ProbesServerPort)}
	}
	return nil
}

// Entry is one line of the effective configuration, safe to print.
type Entry struct {
	Env    string
	Value  string
	Origin Origin
}

// Entries lists the effective configuration in table order, secrets redacted.
func (l *Loaded) Entries() []Entry {
	out := make([]Entry, 0, len(l.settings))
	for _, s := range l.settings {
		o := l.origins[s.Env]
		v := s.value.String()
		if s.Secret && o.Kind != "default" && v != "" {
			v = "<redacted>"
		}
		out = append(out, Entry{Env: s.Env, Value: v, Origin: o})
	}
	return out
}

// Origin reports where the value of the setting named env came from.
func (l *Loaded) Origin(env string) Origin { return l.origins[env] }

// Print writes the effective configuration as a table.
func (l *Loaded) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVALUE\tSOURCE")
	for _, e := range l.Entries() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Env, quoteIfNeeded(e.Value), e.Origin)
	}
	return tw.Flush()
}

func quoteIfNeeded(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n") {
		return fmt.Sprintf("%q", v)
	}
	return v
}

func redactIf(s *Setting, raw string) string {
	if s.Secret {
		return "<redacted>"
	}
	return raw
}

// Settings describes every setting, for documentation and tests. The values bound to the
// returned settings belong to a throwaway Config.
func Settings() []*Setting { return settings(&Config{}) }
