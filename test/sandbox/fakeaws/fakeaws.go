// SPDX-License-Identifier: Apache-2.0

// Package fakeaws is a small in-process fake of the AWS EC2, Auto Scaling and
// Elastic Load Balancing v2 query APIs (and of EventBridge's rules and EKS's
// DescribeNodegroup), for tests and sandboxes that have no network access to AWS.
//
// Real aws-sdk-go-v2 clients talk to it by setting BaseEndpoint to URL(). It
// keeps a tiny model of the world (instances, Auto Scaling group tags,
// lifecycle hooks and pending lifecycle actions, ELBv2 target groups and the
// registration and draining of their targets), records every request it
// receives so tests can assert on what the code under test did, and can inject
// faults (throttling, 5xx) to exercise retry and error paths.
//
// Because node-termination handlers are usually configured with one
// AWS_ENDPOINT for every service, requests for SQS (recognised by their
// X-Amz-Target header, since aws-sdk-go-v2 uses the JSON protocol for SQS) are
// reverse-proxied unchanged to a separate SQS fake, Options.SQSBackend.
package fakeaws

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Instance is an EC2 instance known to the fake.
type Instance struct {
	ID               string
	PrivateDNSName   string
	PrivateIP        string
	AvailabilityZone string
	InstanceType     string
	State            string // EC2 state name; "" means "running"
	Tags             map[string]string
	// AutoScalingGroup, when set, makes the instance a member of that group:
	// it is reported by DescribeAutoScalingInstances and carries the
	// aws:autoscaling:groupName tag, as real ASG-launched instances do.
	AutoScalingGroup string
	// CapacityReservationID, when set, runs the instance in that capacity reservation (a
	// Capacity Block): DescribeInstances reports it and filters on it.
	CapacityReservationID string
}

// LifecycleHook is an Auto Scaling lifecycle hook. Zero fields get the AWS
// defaults when added (see AddLifecycleHook).
type LifecycleHook struct {
	Name             string
	AutoScalingGroup string
	Transition       string // e.g. "autoscaling:EC2_INSTANCE_TERMINATING"
	HeartbeatTimeout int    // seconds
	GlobalTimeout    int    // seconds
	DefaultResult    string // "CONTINUE" or "ABANDON"
}

// Call is one request received by the fake.
type Call struct {
	Service   string // "ec2", "autoscaling", "elasticloadbalancing", "sqs", "events", "eks" ("unknown" if unrecognised)
	Action    string
	Params    url.Values // form parameters; nil for proxied SQS requests
	At        time.Time
	ErrorCode string // "" on success
	// Body is the JSON request body of an SQS call (its receipt handles, for instance);
	// empty for the query APIs, whose parameters are in Params.
	Body string
}

// Fault makes matching requests fail. Empty Service or Action match anything.
type Fault struct {
	Service string
	Action  string
	Status  int    // HTTP status; 0 means 500
	Code    string // AWS error code; "" means "InternalError"
	// Until is when the fault stops applying; the zero time means it applies
	// until ClearFaults.
	Until time.Time
}

// Options configure a Server.
type Options struct {
	// SQSBackend is the base URL SQS requests are proxied to, or "" to reject
	// them with an error.
	SQSBackend string
	// Clock is the fake's time for what lasts a while at AWS: a deregistered target's
	// draining. Default: the real clock. The calls' times (Calls) are the real ones.
	Clock clock.PassiveClock
}

// Server is the fake. It is an http.Handler and can also serve itself on a
// loopback port via Start. All methods are safe for concurrent use.
type Server struct {
	proxy      *httputil.ReverseProxy // nil if no SQS backend
	backendErr error                  // set if Options.SQSBackend is invalid
	clock      clock.PassiveClock

	mu        sync.Mutex
	instances []*Instance // insertion order, which is the order EC2 reports
	groupTags map[string]map[string]string
	hooks     []LifecycleHook
	actions   map[string]*lifecycleAction // by token
	// retainOnAbandon holds the groups whose instance lifecycle policy retains an instance
	// whose termination hook is abandoned (TerminateHookAbandon: retain).
	retainOnAbandon map[string]bool
	// maintenance holds the groups' instance maintenance policies (SetMaintenancePolicy).
	maintenance  map[string]MaintenancePolicy
	groups       []*targetGroup                 // ELBv2, in the order added
	statuses     map[string]Status              // DescribeInstanceStatus, by instance
	reservations map[string]CapacityReservation // DescribeCapacityReservations, by id
	unhealthy    map[string]int                 // SetInstanceHealth Unhealthy calls, by instance
	calls        []Call
	faults       []Fault
	requestSeq   int
	activities   int // scaling activities started (TerminateInstanceInAutoScalingGroup)
	onCall       func(Call)
	rules        map[string]Rule      // EventBridge, by name
	queueAttrs   map[string][2]string // queue URL -> ARN, policy (GetQueueAttributes)
	nodegroups   map[string]Nodegroup // EKS managed node groups, by cluster/name
	srv          *http.Server
	url          string
}

type lifecycleAction struct {
	hook, group, instanceID string
	result                  string
	completed               bool
	heartbeats              int
}

// New returns a Server with no state. It serves nothing until Start is called
// or it is mounted as an http.Handler.
func New(opts Options) *Server {
	s := &Server{
		groupTags:       map[string]map[string]string{},
		actions:         map[string]*lifecycleAction{},
		retainOnAbandon: map[string]bool{},
		maintenance:     map[string]MaintenancePolicy{},
		clock:           opts.Clock,
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if opts.SQSBackend != "" {
		s.proxy, s.backendErr = newSQSProxy(opts.SQSBackend)
	}
	return s
}

// Start serves the fake on an ephemeral port of 127.0.0.1. Loopback only: the
// fake must never be reachable from outside the machine.
func (s *Server) Start() error {
	if s.backendErr != nil {
		return s.backendErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("fakeaws: server already started")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fakeaws: listen: %w", err)
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.url = "http://" + ln.Addr().String()
	go s.srv.Serve(ln) //nolint:errcheck // always returns ErrServerClosed after Close
	return nil
}

// URL is the base URL of a started server ("" before Start).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Close stops a started server at once, dropping any in-flight requests. (A
// graceful Shutdown would wait up to 5s for client connections that were
// dialled but never used, which SDK clients leave behind under load.)
func (s *Server) Close() {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// AddInstance adds an instance, replacing any with the same ID.
func (s *Server) AddInstance(in Instance) {
	if in.State == "" {
		in.State = "running"
	}
	in.Tags = cloneMap(in.Tags)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.instanceIndex(in.ID); i >= 0 {
		s.instances[i] = &in
		return
	}
	s.instances = append(s.instances, &in)
}

// RemoveInstance forgets an instance; unknown IDs are ignored.
func (s *Server) RemoveInstance(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.instanceIndex(id); i >= 0 {
		s.instances = slices.Delete(s.instances, i, i+1)
	}
}

func (s *Server) instanceIndex(id string) int {
	return slices.IndexFunc(s.instances, func(in *Instance) bool { return in.ID == id })
}

// SetAutoScalingGroupTags sets the tags of an Auto Scaling group, as returned
// by the Auto Scaling DescribeTags action (instance tags are separate).
func (s *Server) SetAutoScalingGroupTags(group string, tags map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groupTags[group] = cloneMap(tags)
}

// AddLifecycleHook adds a hook, replacing any with the same group and name.
// Zero fields get AWS defaults: transition EC2_INSTANCE_TERMINATING, heartbeat
// timeout 3600s, global timeout min(100*heartbeat, 172800)s, result ABANDON.
func (s *Server) AddLifecycleHook(h LifecycleHook) {
	if h.Transition == "" {
		h.Transition = "autoscaling:EC2_INSTANCE_TERMINATING"
	}
	if h.HeartbeatTimeout == 0 {
		h.HeartbeatTimeout = 3600
	}
	if h.GlobalTimeout == 0 {
		h.GlobalTimeout = min(100*h.HeartbeatTimeout, 172800)
	}
	if h.DefaultResult == "" {
		h.DefaultResult = "ABANDON"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.hooks, func(o LifecycleHook) bool {
		return o.Name == h.Name && o.AutoScalingGroup == h.AutoScalingGroup
	})
	if i >= 0 {
		s.hooks[i] = h
		return
	}
	s.hooks = append(s.hooks, h)
}

// BeginLifecycleAction starts a pending lifecycle action, as Auto Scaling does
// when an instance enters a hooked transition. From then on it can be
// heartbeated and completed (once), by token or by instance ID.
func (s *Server) BeginLifecycleAction(hookName, asg, instanceID, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.actions[token] = &lifecycleAction{hook: hookName, group: asg, instanceID: instanceID}
}

// LifecycleActionInstance returns the instance of the action with the given token, or "".
func (s *Server) LifecycleActionInstance(token string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.actions[token]; ok {
		return a.instanceID
	}
	return ""
}

// LifecycleAction reports the state of the action with the given token; ok is
// false if there is none.
func (s *Server) LifecycleAction(token string) (result string, completed bool, heartbeats int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.actions[token]
	if !ok {
		return "", false, 0, false
	}
	return a.result, a.completed, a.heartbeats, true
}

// Calls returns a copy of every request received so far, in arrival order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Call, len(s.calls))
	for i, c := range s.calls {
		c.Params = cloneValues(c.Params)
		out[i] = c
	}
	return out
}

// CallCount counts the recorded requests for service and action; an empty
// service or action matches any.
func (s *Server) CallCount(service, action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if matches(service, c.Service) && matches(action, c.Action) {
			n++
		}
	}
	return n
}

// SetFault adds a fault. When several match a request, the earliest added
// wins.
func (s *Server) SetFault(f Fault) {
	if f.Status == 0 {
		f.Status = http.StatusInternalServerError
	}
	if f.Code == "" {
		f.Code = "InternalError"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// Deny makes requests for action (any action when "") of service fail as AWS
// does when IAM refuses them: 403 with UnauthorizedOperation for EC2,
// AccessDeniedException for EKS and AccessDenied for the others. Like any fault, it lasts until ClearFaults.
func (s *Server) Deny(service, action string) {
	code := "AccessDenied"
	switch service {
	case "ec2":
		code = "UnauthorizedOperation"
	case "eks":
		code = "AccessDeniedException"
	}
	s.SetFault(Fault{Service: service, Action: action, Status: http.StatusForbidden, Code: code})
}

// ClearFaults removes all faults.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// activeFault returns the fault that applies to a request now, if any.
func (s *Server) activeFault(service, action string, now time.Time) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		if (f.Until.IsZero() || now.Before(f.Until)) && matches(f.Service, service) && matches(f.Action, action) {
			return f, true
		}
	}
	return Fault{}, false
}

// OnCall makes f run for every request as it arrives, before it is answered (or
// forwarded), on the request's goroutine: a test can check the world at the moment of a
// call, e.g. that a message is deleted only after its work is done. nil removes it.
func (s *Server) OnCall(f func(Call)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCall = f
}

// record stores a call as it arrives (so that long-polling requests are
// visible while in flight), tells the OnCall function, and returns its index
// and a fresh request ID.
func (s *Server) record(c Call) (int, string) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.requestSeq++
	idx, id, f := len(s.calls)-1, fmt.Sprintf("00000000-0000-4000-8000-%012d", s.requestSeq), s.onCall
	s.mu.Unlock()
	if f != nil {
		c.Params = cloneValues(c.Params)
		f(c)
	}
	return idx, id
}

// setErrorCode marks a recorded call as failed once its outcome is known.
func (s *Server) setErrorCode(i int, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[i].ErrorCode = code
}

// ServeHTTP dispatches SQS requests to the proxy and everything else to the
// query API handlers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if op, ok := sqsOperation(r); ok {
		s.serveSQS(w, r, op)
		return
	}
	if op, ok := eventsOperation(r); ok {
		s.serveEvents(w, r, op)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/clusters/") {
		s.serveEKS(w, r)
		return
	}
	s.serveQuery(w, r)
}

func matches(pattern, v string) bool { return pattern == "" || pattern == v }

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cloneValues(v url.Values) url.Values {
	if v == nil {
		return nil
	}
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}
