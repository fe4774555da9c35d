// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"cmp"
	"crypto/sha256"
	"encoding/xml"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LoadBalancerARN is the fake's one load balancer: it uses every target group
// that is not Unattached.
const LoadBalancerARN = "arn:aws:elasticloadbalancing:us-east-1:" + Account + ":loadbalancer/app/fakeaws/50dc6c495c0c9188"

// defaultDeregistrationDelay is AWS's default deregistration_delay.timeout_seconds.
const defaultDeregistrationDelay = 300 * time.Second

// TargetGroup is an ELBv2 target group. Zero fields get AWS defaults when
// added (see AddTargetGroup).
type TargetGroup struct {
	Name       string
	TargetType string // "instance" (the default) or "ip"
	Port       int    // the port of targets registered without one; 0 means 80
	// DeregistrationDelay is how long a deregistered target drains before it
	// is gone. 0 means AWS's default of 300s; a negative delay removes
	// targets at once (AWS's delay of 0).
	DeregistrationDelay time.Duration
	// Unattached makes the group one no load balancer uses: its targets
	// report state "unused".
	Unattached bool
}

type targetGroup struct {
	TargetGroup
	arn     string
	targets []*target // in registration order, which is the order ELBv2 reports
}

// target is one registration. ELBv2 tells targets apart by ID and port: one
// instance or IP can be registered on several ports of a group.
type target struct {
	id             string
	port           int
	deregisteredAt time.Time // zero while registered
}

type targetHealth struct{ state, reason, description string }

// notRegistered is what ELBv2 reports for a target named in
// DescribeTargetHealth that is not (or no longer) in the group.
var notRegistered = targetHealth{"unused", "Target.NotRegistered", "Target is not registered to the target group"}

// AddTargetGroup adds a target group and returns its ARN, which depends only
// on the name. A group of the same name is replaced, keeping its ARN and
// targets (so a test can, say, attach it mid-way). Zero fields get defaults:
// target type "instance", port 80, deregistration delay 300s.
func (s *Server) AddTargetGroup(tg TargetGroup) (arn string) {
	if tg.TargetType == "" {
		tg.TargetType = "instance"
	}
	if tg.Port == 0 {
		tg.Port = 80
	}
	if tg.DeregistrationDelay == 0 {
		tg.DeregistrationDelay = defaultDeregistrationDelay
	}
	sum := sha256.Sum256([]byte(tg.Name))
	arn = fmt.Sprintf("arn:aws:elasticloadbalancing:us-east-1:%s:targetgroup/%s/%x", Account, tg.Name, sum[:8])
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groupByARN(arn); g != nil {
		g.TargetGroup = tg
		return arn
	}
	s.groups = append(s.groups, &targetGroup{TargetGroup: tg, arn: arn})
	return arn
}

// RegisterTarget registers a target as the AWS Load Balancer Controller or an
// Auto Scaling group would, with the effect of RegisterTargets. Port 0 means
// the group's port.
func (s *Server) RegisterTarget(arn, id string, port int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.targetGroup(arn)
	if err != nil {
		return fmt.Errorf("fakeaws: %w", err)
	}
	port = cmp.Or(port, g.Port)
	if err := g.validTarget(id, port); err != nil {
		return fmt.Errorf("fakeaws: %w", err)
	}
	g.register(id, port, s.clock.Now())
	return nil
}

// DeregisterTarget deregisters id on every port it is registered on, with the
// effect of DeregisterTargets: it drains for the group's delay, then is gone.
// An ID that is not registered is ignored, as AWS does.
func (s *Server) DeregisterTarget(arn, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.targetGroup(arn)
	if err != nil {
		return fmt.Errorf("fakeaws: %w", err)
	}
	g.deregister(id, 0, s.clock.Now())
	return nil
}

// TargetState reports the state DescribeTargetHealth gives for id when named
// explicitly ("healthy", "unused", "draining", or "unused" again once it is
// not in the group at all), and whether id is registered now (false while it
// drains). If id is registered on several ports, a live registration wins
// over a draining one. An unknown group gives "", false.
func (s *Server) TargetState(arn, id string) (state string, registered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groupByARN(arn)
	if g == nil {
		return "", false
	}
	h := notRegistered
	for _, t := range g.live(s.clock.Now()) {
		if t.id != id {
			continue
		}
		if t.deregisteredAt.IsZero() {
			return g.health(t).state, true
		}
		h = g.health(t)
	}
	return h.state, false
}

// groupByARN returns the group with the ARN, or nil. The caller holds s.mu.
func (s *Server) groupByARN(arn string) *targetGroup {
	i := slices.IndexFunc(s.groups, func(g *targetGroup) bool { return g.arn == arn })
	if i < 0 {
		return nil
	}
	return s.groups[i]
}

// targetGroup returns the group a request's TargetGroupArn names, or the
// error ELBv2 gives. The caller holds s.mu.
func (s *Server) targetGroup(arn string) (*targetGroup, error) {
	if arn == "" {
		return nil, errorf("ValidationError", "1 validation error detected: Value null at 'targetGroupArn' failed to satisfy constraint: Member must not be null")
	}
	if !strings.HasPrefix(arn, "arn:") {
		return nil, errorf("ValidationError", "'%s' is not a valid target group ARN", arn)
	}
	if g := s.groupByARN(arn); g != nil {
		return g, nil
	}
	return nil, errorf("TargetGroupNotFound", "Target groups '%s' not found", arn)
}

// live drops the targets whose draining is over and returns the rest: states
// are computed from timestamps when looked at, with no timers. The caller
// holds s.mu.
func (g *targetGroup) live(now time.Time) []*target {
	delay := max(g.DeregistrationDelay, 0)
	g.targets = slices.DeleteFunc(g.targets, func(t *target) bool {
		return !t.deregisteredAt.IsZero() && now.Sub(t.deregisteredAt) >= delay
	})
	return g.targets
}

// health is the state of a target still in the group. The fake has no health
// checks, so a registered target is healthy at once (real ones pass through
// "initial" first).
func (g *targetGroup) health(t *target) targetHealth {
	switch {
	case !t.deregisteredAt.IsZero():
		return targetHealth{"draining", "Target.DeregistrationInProgress", "Target deregistration is in progress"}
	case g.Unattached:
		return targetHealth{"unused", "Target.NotInUse", "Target group is not configured to receive traffic from the load balancer"}
	default:
		return targetHealth{state: "healthy"}
	}
}

// register adds a target; registering a draining one makes it live again.
// The caller holds s.mu.
func (g *targetGroup) register(id string, port int, now time.Time) {
	for _, t := range g.live(now) {
		if t.id == id && t.port == port {
			t.deregisteredAt = time.Time{}
			return
		}
	}
	g.targets = append(g.targets, &target{id: id, port: port})
}

// deregister starts draining id on port (any port if 0). Deregistering a
// draining target again does not restart its delay. The caller holds s.mu.
func (g *targetGroup) deregister(id string, port int, now time.Time) {
	for _, t := range g.live(now) {
		if t.id == id && (port == 0 || t.port == port) && t.deregisteredAt.IsZero() {
			t.deregisteredAt = now
		}
	}
	g.live(now) // a delay of zero removes them at once
}

// validTarget checks that id fits the group's target type, so that code
// registering, say, node names instead of instance IDs fails as it would on
// AWS. The instance need not be known to the fake.
func (g *targetGroup) validTarget(id string, port int) error {
	if port < 1 || port > 65535 {
		return errorf("ValidationError", "Port %d is not valid: it must be between 1 and 65535", port)
	}
	switch g.TargetType {
	case "ip":
		if _, err := netip.ParseAddr(id); err != nil {
			return errorf("ValidationError", "The IP address '%s' is not a valid IPv4 or IPv6 address", id)
		}
	case "instance":
		if !strings.HasPrefix(id, "i-") {
			return errorf("ValidationError", "Instance ID '%s' is not valid", id)
		}
	}
	return nil
}

type targetRef struct {
	id   string
	port int // 0 if not given
}

// parseTargets reads Targets.member.N.Id and .Port.
func parseTargets(p url.Values) ([]targetRef, error) {
	var out []targetRef
	for i := 1; ; i++ {
		base := "Targets.member." + strconv.Itoa(i)
		id, port := p.Get(base+".Id"), p.Get(base+".Port")
		if id == "" && port == "" {
			return out, nil
		}
		if id == "" {
			return nil, errorf("ValidationError", "1 validation error detected: Value null at 'targets.%d.member.id' failed to satisfy constraint: Member must not be null", i)
		}
		ref := targetRef{id: id}
		if port != "" {
			n, err := strconv.Atoi(port)
			if err != nil || n < 1 || n > 65535 {
				return nil, errorf("ValidationError", "Port '%s' of target '%s' is not valid: it must be between 1 and 65535", port, id)
			}
			ref.port = n
		}
		out = append(out, ref)
	}
}

// requiredTargets reads the Targets of RegisterTargets and DeregisterTargets.
func requiredTargets(p url.Values) ([]targetRef, error) {
	refs, err := parseTargets(p)
	if err == nil && len(refs) == 0 {
		err = errorf("ValidationError", "1 validation error detected: Value null at 'targets' failed to satisfy constraint: Member must not be null")
	}
	return refs, err
}

type elbDescribeTargetGroupsResult struct {
	XMLName      xml.Name         `xml:"DescribeTargetGroupsResult"`
	TargetGroups []elbTargetGroup `xml:"TargetGroups>member"`
	NextMarker   string           `xml:"NextMarker,omitempty"`
}

type elbTargetGroup struct {
	TargetGroupArn      string   `xml:"TargetGroupArn"`
	TargetGroupName     string   `xml:"TargetGroupName"`
	Protocol            string   `xml:"Protocol"`
	Port                int      `xml:"Port"`
	VpcID               string   `xml:"VpcId"`
	HealthCheckProtocol string   `xml:"HealthCheckProtocol"`
	HealthCheckPort     string   `xml:"HealthCheckPort"`
	HealthCheckEnabled  bool     `xml:"HealthCheckEnabled"`
	HealthCheckPath     string   `xml:"HealthCheckPath"`
	LoadBalancerArns    []string `xml:"LoadBalancerArns>member"`
	TargetType          string   `xml:"TargetType"`
	IPAddressType       string   `xml:"IpAddressType"`
	ProtocolVersion     string   `xml:"ProtocolVersion"`
}

type elbDescribeTargetHealthResult struct {
	XMLName      xml.Name                     `xml:"DescribeTargetHealthResult"`
	Descriptions []elbTargetHealthDescription `xml:"TargetHealthDescriptions>member"`
}

type elbTargetHealthDescription struct {
	ID              string `xml:"Target>Id"`
	Port            int    `xml:"Target>Port"`
	HealthCheckPort string `xml:"HealthCheckPort"`
	State           string `xml:"TargetHealth>State"`
	Reason          string `xml:"TargetHealth>Reason,omitempty"`
	Description     string `xml:"TargetHealth>Description,omitempty"`
}

type elbRegisterTargetsResult struct {
	XMLName xml.Name `xml:"RegisterTargetsResult"`
}

type elbDeregisterTargetsResult struct {
	XMLName xml.Name `xml:"DeregisterTargetsResult"`
}

func (s *Server) elbDescribeTargetGroups(p url.Values) (any, error) {
	arns, names, lb := listParam(p, "TargetGroupArns.member"), listParam(p, "Names.member"), p.Get("LoadBalancerArn")
	if len(arns) > 0 && len(names) > 0 || lb != "" && len(arns)+len(names) > 0 {
		return nil, errorf("ValidationError", "Target group ARNs, target group names and a load balancer ARN cannot be specified at the same time")
	}
	for _, a := range arns {
		if !strings.HasPrefix(a, "arn:") {
			return nil, errorf("ValidationError", "'%s' is not a valid target group ARN", a)
		}
	}
	if lb != "" && lb != LoadBalancerARN {
		return nil, errorf("LoadBalancerNotFound", "One or more load balancers not found")
	}
	s.mu.Lock()
	selected, err := s.selectTargetGroups(arns, names, lb != "")
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	start, end, next, err := elbGroupPaging.page(p, len(selected))
	if err != nil {
		return nil, err
	}
	return &elbDescribeTargetGroupsResult{TargetGroups: selected[start:end], NextMarker: next}, nil
}

// selectTargetGroups describes the groups with the given ARNs or names (all
// if none), only those the load balancer uses if attached. The caller holds
// s.mu.
func (s *Server) selectTargetGroups(arns, names []string, attached bool) ([]elbTargetGroup, error) {
	// One unknown group fails the whole call, as on AWS.
	for _, a := range arns {
		if s.groupByARN(a) == nil {
			return nil, errorf("TargetGroupNotFound", "One or more target groups not found")
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(s.groups, func(g *targetGroup) bool { return g.Name == n }) {
			return nil, errorf("TargetGroupNotFound", "One or more target groups not found")
		}
	}
	var out []elbTargetGroup
	for _, g := range s.groups {
		if len(arns) > 0 && !slices.Contains(arns, g.arn) ||
			len(names) > 0 && !slices.Contains(names, g.Name) ||
			attached && g.Unattached {
			continue
		}
		tg := elbTargetGroup{
			TargetGroupArn: g.arn, TargetGroupName: g.Name, Protocol: "HTTP", Port: g.Port, VpcID: "vpc-fake",
			HealthCheckProtocol: "HTTP", HealthCheckPort: "traffic-port", HealthCheckEnabled: true, HealthCheckPath: "/",
			TargetType: g.TargetType, IPAddressType: "ipv4", ProtocolVersion: "HTTP1",
		}
		if !g.Unattached {
			tg.LoadBalancerArns = []string{LoadBalancerARN}
		}
		out = append(out, tg)
	}
	return out, nil
}

func (s *Server) elbDescribeTargetHealth(p url.Values) (any, error) {
	refs, err := parseTargets(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.targetGroup(p.Get("TargetGroupArn"))
	if err != nil {
		return nil, err
	}
	describe := func(id string, port int, h targetHealth) elbTargetHealthDescription {
		return elbTargetHealthDescription{
			ID: id, Port: port, HealthCheckPort: strconv.Itoa(port),
			State: h.state, Reason: h.reason, Description: h.description,
		}
	}
	res := &elbDescribeTargetHealthResult{}
	live := g.live(s.clock.Now())
	if len(refs) == 0 {
		for _, t := range live {
			res.Descriptions = append(res.Descriptions, describe(t.id, t.port, g.health(t)))
		}
		return res, nil
	}
	// A named target without a port matches its registrations on any port.
	for _, r := range refs {
		found := false
		for _, t := range live {
			if t.id == r.id && (r.port == 0 || t.port == r.port) {
				res.Descriptions = append(res.Descriptions, describe(t.id, t.port, g.health(t)))
				found = true
			}
		}
		if !found {
			res.Descriptions = append(res.Descriptions, describe(r.id, cmp.Or(r.port, g.Port), notRegistered))
		}
	}
	return res, nil
}

func (s *Server) elbRegisterTargets(p url.Values) (any, error) {
	refs, err := requiredTargets(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.targetGroup(p.Get("TargetGroupArn"))
	if err != nil {
		return nil, err
	}
	// Check them all first: a bad target fails the call and registers none.
	for i, r := range refs {
		refs[i].port = cmp.Or(r.port, g.Port)
		if err := g.validTarget(r.id, refs[i].port); err != nil {
			return nil, err
		}
	}
	now := s.clock.Now()
	for _, r := range refs {
		g.register(r.id, r.port, now)
	}
	return &elbRegisterTargetsResult{}, nil
}

func (s *Server) elbDeregisterTargets(p url.Values) (any, error) {
	refs, err := requiredTargets(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.targetGroup(p.Get("TargetGroupArn"))
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	for _, r := range refs {
		// Without a port AWS means the group's port: a target registered on
		// another port must be deregistered with it, or stays registered.
		g.deregister(r.id, cmp.Or(r.port, g.Port), now)
	}
	return &elbDeregisterTargetsResult{}, nil
}
