// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"encoding/xml"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"time"
)

type asgDescribeInstancesResult struct {
	XMLName   xml.Name      `xml:"DescribeAutoScalingInstancesResult"`
	Instances []asgInstance `xml:"AutoScalingInstances>member"`
	NextToken string        `xml:"NextToken,omitempty"`
}

type asgInstance struct {
	InstanceID           string `xml:"InstanceId"`
	InstanceType         string `xml:"InstanceType,omitempty"`
	AutoScalingGroupName string `xml:"AutoScalingGroupName"`
	AvailabilityZone     string `xml:"AvailabilityZone"`
	LifecycleState       string `xml:"LifecycleState"`
	HealthStatus         string `xml:"HealthStatus"`
	ProtectedFromScaleIn bool   `xml:"ProtectedFromScaleIn"`
}

type asgDescribeHooksResult struct {
	XMLName xml.Name  `xml:"DescribeLifecycleHooksResult"`
	Hooks   []asgHook `xml:"LifecycleHooks>member"`
}

type asgHook struct {
	LifecycleHookName    string `xml:"LifecycleHookName"`
	AutoScalingGroupName string `xml:"AutoScalingGroupName"`
	LifecycleTransition  string `xml:"LifecycleTransition"`
	HeartbeatTimeout     int    `xml:"HeartbeatTimeout"`
	GlobalTimeout        int    `xml:"GlobalTimeout"`
	DefaultResult        string `xml:"DefaultResult"`
}

type asgDescribeTagsResult struct {
	XMLName   xml.Name `xml:"DescribeTagsResult"`
	Tags      []asgTag `xml:"Tags>member"`
	NextToken string   `xml:"NextToken,omitempty"`
}

type asgTag struct {
	ResourceID        string `xml:"ResourceId"`
	ResourceType      string `xml:"ResourceType"`
	Key               string `xml:"Key"`
	Value             string `xml:"Value"`
	PropagateAtLaunch bool   `xml:"PropagateAtLaunch"`
}

type asgCompleteResult struct {
	XMLName xml.Name `xml:"CompleteLifecycleActionResult"`
}

type asgHeartbeatResult struct {
	XMLName xml.Name `xml:"RecordLifecycleActionHeartbeatResult"`
}

func (s *Server) asgDescribeAutoScalingInstances(p url.Values) (any, error) {
	ids := listParam(p, "InstanceIds.member")
	s.mu.Lock()
	defer s.mu.Unlock()
	// Unlike EC2, Auto Scaling silently leaves out unknown instances (and
	// those in no group).
	var selected []asgInstance
	for _, in := range s.instances {
		if in.AutoScalingGroup == "" || (len(ids) > 0 && !slices.Contains(ids, in.ID)) {
			continue
		}
		selected = append(selected, asgInstance{
			InstanceID:           in.ID,
			InstanceType:         in.InstanceType,
			AutoScalingGroupName: in.AutoScalingGroup,
			AvailabilityZone:     in.AvailabilityZone,
			LifecycleState:       s.lifecycleState(in),
			HealthStatus:         "HEALTHY",
		})
	}
	start, end, next, err := asgInstancePaging.page(p, len(selected))
	if err != nil {
		return nil, err
	}
	return &asgDescribeInstancesResult{Instances: selected[start:end], NextToken: next}, nil
}

// lifecycleState derives the Auto Scaling lifecycle state of an instance from
// its lifecycle actions and EC2 state. The caller holds s.mu.
func (s *Server) lifecycleState(in *Instance) string {
	// An instance can have had several actions; the active one tells most.
	var act *lifecycleAction
	for _, a := range s.actions {
		if a.instanceID == in.ID && a.group == in.AutoScalingGroup && (act == nil || act.completed) {
			act = a
		}
	}
	switch in.State {
	case "shutting-down":
		return "Terminating"
	case "terminated":
		return "Terminated"
	}
	if act != nil {
		phase := "Terminating"
		for _, h := range s.hooks {
			if h.Name == act.hook && h.AutoScalingGroup == act.group && h.Transition == "autoscaling:EC2_INSTANCE_LAUNCHING" {
				phase = "Pending"
			}
		}
		if act.completed && act.result == "ABANDON" && phase == "Terminating" && s.retainOnAbandon[act.group] {
			return "Terminating:Retained"
		}
		if act.completed {
			return phase + ":Proceed"
		}
		return phase + ":Wait"
	}
	switch in.State {
	case "pending":
		return "Pending"
	case "shutting-down", "stopping":
		return "Terminating"
	case "terminated", "stopped":
		return "Terminated"
	default:
		return "InService"
	}
}

// groupExists reports whether anything in the fake mentions group. The
// caller holds s.mu.
func (s *Server) groupExists(group string) bool {
	_, tagged := s.groupTags[group]
	_, maintained := s.maintenance[group]
	return tagged || maintained ||
		slices.ContainsFunc(s.instances, func(in *Instance) bool { return in.AutoScalingGroup == group }) ||
		slices.ContainsFunc(s.hooks, func(h LifecycleHook) bool { return h.AutoScalingGroup == group })
}

func (s *Server) asgDescribeLifecycleHooks(p url.Values) (any, error) {
	group := p.Get("AutoScalingGroupName")
	if group == "" {
		return nil, errorf("ValidationError", "1 validation error detected: Value null at 'autoScalingGroupName' failed to satisfy constraint: Member must not be null")
	}
	names := listParam(p, "LifecycleHookNames.member")
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.groupExists(group) {
		return nil, errorf("ValidationError", "Group %s not found", group)
	}
	res := &asgDescribeHooksResult{}
	for _, h := range s.hooks {
		if h.AutoScalingGroup != group || (len(names) > 0 && !slices.Contains(names, h.Name)) {
			continue
		}
		res.Hooks = append(res.Hooks, asgHook{
			LifecycleHookName:    h.Name,
			AutoScalingGroupName: h.AutoScalingGroup,
			LifecycleTransition:  h.Transition,
			HeartbeatTimeout:     h.HeartbeatTimeout,
			GlobalTimeout:        h.GlobalTimeout,
			DefaultResult:        h.DefaultResult,
		})
	}
	return res, nil
}

func (s *Server) asgDescribeTags(p url.Values) (any, error) {
	filters := parseFilters(p, "Filters.member", "Values.member")
	for _, f := range filters {
		switch f.Name {
		case "auto-scaling-group", "key", "value", "propagate-at-launch":
		default:
			return nil, errorf("ValidationError", "Filter type %s is not correct. Allowed Filter types are: auto-scaling-group key value propagate-at-launch", f.Name)
		}
	}
	s.mu.Lock()
	var selected []asgTag
	for _, group := range slices.Sorted(maps.Keys(s.groupTags)) {
		tags := s.groupTags[group]
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			attrs := map[string]string{"auto-scaling-group": group, "key": k, "value": tags[k], "propagate-at-launch": "true"}
			if slices.ContainsFunc(filters, func(f filter) bool {
				return !anyMatch([]string{attrs[f.Name]}, f.Values, equalMatch)
			}) {
				continue
			}
			selected = append(selected, asgTag{
				ResourceID: group, ResourceType: "auto-scaling-group", Key: k, Value: tags[k], PropagateAtLaunch: true,
			})
		}
	}
	s.mu.Unlock()
	start, end, next, err := asgTagPaging.page(p, len(selected))
	if err != nil {
		return nil, err
	}
	return &asgDescribeTagsResult{Tags: selected[start:end], NextToken: next}, nil
}

func (s *Server) asgCompleteLifecycleAction(p url.Values) (any, error) {
	result := p.Get("LifecycleActionResult")
	if result != "CONTINUE" && result != "ABANDON" {
		return nil, errorf("ValidationError", "LifecycleActionResult must be CONTINUE or ABANDON, not '%s'", result)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.activeAction(p)
	if err != nil {
		return nil, err
	}
	a.completed, a.result = true, result
	if result == "ABANDON" && !s.retainOnAbandon[a.group] && s.terminating(a) {
		// Without a policy that retains it, an abandoned termination goes on at once.
		if i := s.instanceIndex(a.instanceID); i >= 0 {
			s.instances[i].State = "terminated"
		}
	}
	return &asgCompleteResult{}, nil
}

func (s *Server) asgRecordLifecycleActionHeartbeat(p url.Values) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.activeAction(p)
	if err != nil {
		return nil, err
	}
	a.heartbeats++
	return &asgHeartbeatResult{}, nil
}

// activeAction finds the uncompleted lifecycle action a Complete or Heartbeat
// request names, by token or else by instance ID. The caller holds s.mu.
func (s *Server) activeAction(p url.Values) (*lifecycleAction, error) {
	hook, group := p.Get("LifecycleHookName"), p.Get("AutoScalingGroupName")
	if hook == "" || group == "" {
		return nil, errorf("ValidationError", "LifecycleHookName and AutoScalingGroupName are required")
	}
	active := func(a *lifecycleAction) bool {
		return a != nil && !a.completed && a.hook == hook && a.group == group
	}
	if token := p.Get("LifecycleActionToken"); token != "" {
		if a := s.actions[token]; active(a) {
			return a, nil
		}
		return nil, errorf("ValidationError", "No active Lifecycle Action found with token %s", token)
	}
	if id := p.Get("InstanceId"); id != "" {
		for _, a := range s.actions {
			if a.instanceID == id && active(a) {
				return a, nil
			}
		}
		return nil, errorf("ValidationError", "No active Lifecycle Action found with instance ID %s", id)
	}
	return nil, errorf("ValidationError", "Either LifecycleActionToken or InstanceId must be specified")
}

// terminating reports whether the action is for a termination hook (hooks default to one).
// The caller holds s.mu.
func (s *Server) terminating(a *lifecycleAction) bool {
	for _, h := range s.hooks {
		if h.Name == a.hook && h.AutoScalingGroup == a.group {
			return h.Transition == "autoscaling:EC2_INSTANCE_TERMINATING"
		}
	}
	return true
}

// TimeOutLifecycleAction ends the action as its hook's timeout (heartbeat or global) does:
// with a policy that retains abandoned instances the instance stays Terminating:Retained,
// without one its termination goes on. It reports whether the action was active.
func (s *Server) TimeOutLifecycleAction(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.actions[token]
	if a == nil || a.completed {
		return false
	}
	a.completed, a.result = true, "ABANDON"
	if !s.retainOnAbandon[a.group] && s.terminating(a) {
		if i := s.instanceIndex(a.instanceID); i >= 0 {
			s.instances[i].State = "terminated"
		}
	}
	return true
}

// SetRetainOnAbandon sets the group's instance lifecycle policy: with retain, an instance
// whose termination hook is completed with ABANDON stays in the Terminating:Retained state
// until TerminateInstanceInAutoScalingGroup; without, it is terminated at once.
func (s *Server) SetRetainOnAbandon(group string, retain bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retainOnAbandon[group] = retain
}

// MaintenancePolicy is a group's instance maintenance policy: the share of its desired
// capacity that must stay healthy, and that may be in service or pending, while instances are
// replaced.
type MaintenancePolicy struct {
	MinHealthyPercentage int // 0 to 100
	MaxHealthyPercentage int // 100 to 200
}

// SetMaintenancePolicy sets the group's instance maintenance policy, which
// DescribeAutoScalingGroups then states; nil removes it (a group without one states none, as
// AWS's groups do by default). Values outside AWS's ranges panic: a test's mistake.
func (s *Server) SetMaintenancePolicy(group string, p *MaintenancePolicy) {
	if p != nil && (p.MinHealthyPercentage < 0 || p.MinHealthyPercentage > 100 || p.MaxHealthyPercentage < 100 || p.MaxHealthyPercentage > 200 ||
		p.MaxHealthyPercentage-p.MinHealthyPercentage > 100) {
		panic(fmt.Sprintf("fakeaws: instance maintenance policy %+v for %s is outside AWS's ranges", *p, group))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p == nil {
		delete(s.maintenance, group)
		return
	}
	s.maintenance[group] = *p
}

// InstanceState returns the instance's EC2 state and Auto Scaling lifecycle state ("" when
// it is in no group); ok is false for an unknown instance.
func (s *Server) InstanceState(id string) (ec2State, lifecycleState string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.instanceIndex(id)
	if i < 0 {
		return "", "", false
	}
	in := s.instances[i]
	if in.AutoScalingGroup != "" {
		lifecycleState = s.lifecycleState(in)
	}
	return in.State, lifecycleState, true
}

type asgDescribeGroupsResult struct {
	XMLName   xml.Name   `xml:"DescribeAutoScalingGroupsResult"`
	Groups    []asgGroup `xml:"AutoScalingGroups>member"`
	NextToken string     `xml:"NextToken,omitempty"`
}

type asgGroup struct {
	AutoScalingGroupName string             `xml:"AutoScalingGroupName"`
	MinSize              int                `xml:"MinSize"`
	MaxSize              int                `xml:"MaxSize"`
	DesiredCapacity      int                `xml:"DesiredCapacity"`
	Instances            []asgGroupInstance `xml:"Instances>member"`
	// Only a group with a policy states one, as AWS does.
	Policy      *asgLifecyclePolicy   `xml:"InstanceLifecyclePolicy,omitempty"`
	Maintenance *asgMaintenancePolicy `xml:"InstanceMaintenancePolicy,omitempty"`
}

type asgMaintenancePolicy struct {
	MinHealthyPercentage int `xml:"MinHealthyPercentage"`
	MaxHealthyPercentage int `xml:"MaxHealthyPercentage"`
}

type asgGroupInstance struct {
	InstanceID       string `xml:"InstanceId"`
	AvailabilityZone string `xml:"AvailabilityZone"`
	LifecycleState   string `xml:"LifecycleState"`
	HealthStatus     string `xml:"HealthStatus"`
}

type asgLifecyclePolicy struct {
	TerminateHookAbandon string `xml:"RetentionTriggers>TerminateHookAbandon"`
}

var asgGroupPaging = paging{"MaxRecords", "NextToken", 1, 100, 50, "ValidationError", "InvalidNextToken"}

func (s *Server) asgDescribeAutoScalingGroups(p url.Values) (any, error) {
	names := listParam(p, "AutoScalingGroupNames.member")
	s.mu.Lock()
	var groups []string
	add := func(g string) {
		if g != "" && !slices.Contains(groups, g) && (len(names) == 0 || slices.Contains(names, g)) {
			groups = append(groups, g)
		}
	}
	for _, in := range s.instances {
		add(in.AutoScalingGroup)
	}
	for _, h := range s.hooks {
		add(h.AutoScalingGroup)
	}
	for _, g := range slices.Sorted(maps.Keys(s.groupTags)) {
		add(g)
	}
	for _, g := range slices.Sorted(maps.Keys(s.retainOnAbandon)) {
		add(g)
	}
	for _, g := range slices.Sorted(maps.Keys(s.maintenance)) {
		add(g)
	}
	var out []asgGroup
	for _, g := range groups {
		group := asgGroup{AutoScalingGroupName: g}
		for _, in := range s.instances {
			if in.AutoScalingGroup != g {
				continue
			}
			state := s.lifecycleState(in)
			group.Instances = append(group.Instances, asgGroupInstance{InstanceID: in.ID, AvailabilityZone: in.AvailabilityZone,
				LifecycleState: state, HealthStatus: "Healthy"})
			if state == "InService" {
				group.DesiredCapacity++
			}
		}
		group.MaxSize = max(len(group.Instances), 1)
		if retain, set := s.retainOnAbandon[g]; set {
			action := "terminate"
			if retain {
				action = "retain"
			}
			group.Policy = &asgLifecyclePolicy{TerminateHookAbandon: action}
		}
		if m, set := s.maintenance[g]; set {
			group.Maintenance = &asgMaintenancePolicy{MinHealthyPercentage: m.MinHealthyPercentage, MaxHealthyPercentage: m.MaxHealthyPercentage}
		}
		out = append(out, group)
	}
	s.mu.Unlock()
	start, end, next, err := asgGroupPaging.page(p, len(out))
	if err != nil {
		return nil, err
	}
	return &asgDescribeGroupsResult{Groups: out[start:end], NextToken: next}, nil
}

type asgTerminateResult struct {
	XMLName  xml.Name    `xml:"TerminateInstanceInAutoScalingGroupResult"`
	Activity asgActivity `xml:"Activity"`
}

type asgActivity struct {
	ActivityID           string `xml:"ActivityId"`
	AutoScalingGroupName string `xml:"AutoScalingGroupName"`
	Description          string `xml:"Description"`
	Cause                string `xml:"Cause"`
	StartTime            string `xml:"StartTime"`
	StatusCode           string `xml:"StatusCode"`
	Progress             int    `xml:"Progress"`
}

// asgTerminateInstanceInAutoScalingGroup terminates a member of a group: its EC2 state
// becomes shutting-down at once (terminated for the fake's purposes).
func (s *Server) asgTerminateInstanceInAutoScalingGroup(p url.Values) (any, error) {
	id := p.Get("InstanceId")
	decrement := p.Get("ShouldDecrementDesiredCapacity")
	if id == "" || decrement == "" {
		return nil, errorf("ValidationError", "InstanceId and ShouldDecrementDesiredCapacity are required")
	}
	if _, err := strconv.ParseBool(decrement); err != nil {
		return nil, errorf("ValidationError", "ShouldDecrementDesiredCapacity %q is not a boolean", decrement)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.instanceIndex(id)
	if i < 0 || s.instances[i].AutoScalingGroup == "" || s.instances[i].State == "terminated" {
		return nil, errorf("ValidationError", "Instance Id not found - No managed instance found for instance ID: %s", id)
	}
	in := s.instances[i]
	in.State = "terminated"
	s.activities++
	return &asgTerminateResult{Activity: asgActivity{
		ActivityID: fmt.Sprintf("00000000-0000-4000-a000-%012d", s.activities), AutoScalingGroupName: in.AutoScalingGroup,
		Description: "Terminating EC2 instance: " + id, Cause: "instance " + id + " was taken out of service in response to a user request",
		StartTime: time.Now().UTC().Format(time.RFC3339), StatusCode: "InProgress",
	}}, nil
}
