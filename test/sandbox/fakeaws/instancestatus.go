// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// Status is what DescribeInstanceStatus reports of an instance, settable per instance with
// SetInstanceStatus. The zero Status is a healthy instance with no scheduled event.
type Status struct {
	// Instance, System and EBS are the summaries of the three status checks; "" reports ok.
	Instance, System, EBS string
	// Failed names the checks whose reachability detail is failed: "instance", "system",
	// "ebs". A failed check whose summary is "" is reported impaired.
	Failed []string
	// ImpairedSince is the time each failed detail states; zero states none.
	ImpairedSince time.Time
	Events        []StatusEvent
}

// StatusEvent is a scheduled event of an instance, as DescribeInstanceStatus lists it.
type StatusEvent struct {
	ID          string // instance-event-..., the id instance metadata gives the same event
	Code        string // instance-reboot, system-reboot, system-maintenance, instance-retirement, instance-stop
	Description string // AWS prefixes "[Completed] " or "[Canceled] " once it is over
	NotBefore   time.Time
	NotAfter    time.Time
}

// SetInstanceStatus sets what DescribeInstanceStatus reports of an instance (added with
// AddInstance) from now on.
func (s *Server) SetInstanceStatus(id string, st Status) {
	st.Failed = slices.Clone(st.Failed)
	st.Events = slices.Clone(st.Events)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statuses == nil {
		s.statuses = map[string]Status{}
	}
	s.statuses[id] = st
}

// UnhealthyMarks counts the SetInstanceHealth Unhealthy calls the fake accepted for an
// instance.
func (s *Server) UnhealthyMarks(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unhealthy[id]
}

type ec2DescribeInstanceStatusResponse struct {
	XMLName xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeInstanceStatusResponse"`
	ec2Meta
	Statuses  []ec2InstanceStatus `xml:"instanceStatusSet>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

type ec2InstanceStatus struct {
	InstanceID       string           `xml:"instanceId"`
	AvailabilityZone string           `xml:"availabilityZone,omitempty"`
	Events           []ec2StatusEvent `xml:"eventsSet>item"`
	StateCode        int              `xml:"instanceState>code"`
	StateName        string           `xml:"instanceState>name"`
	SystemStatus     ec2StatusSummary `xml:"systemStatus"`
	InstanceStatus   ec2StatusSummary `xml:"instanceStatus"`
	EBSStatus        ec2StatusSummary `xml:"attachedEbsStatus"`
}

type ec2StatusSummary struct {
	Status  string            `xml:"status"`
	Details []ec2StatusDetail `xml:"details>item"`
}

type ec2StatusDetail struct {
	Name          string `xml:"name"`
	Status        string `xml:"status"`
	ImpairedSince string `xml:"impairedSince,omitempty"`
}

type ec2StatusEvent struct {
	ID          string `xml:"instanceEventId"`
	Code        string `xml:"code"`
	Description string `xml:"description"`
	NotBefore   string `xml:"notBefore,omitempty"`
	NotAfter    string `xml:"notAfter,omitempty"`
}

type asgSetInstanceHealthResult struct {
	XMLName xml.Name `xml:"SetInstanceHealthResult"`
}

func ec2Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// summary reports one status check: its summary, and its reachability detail.
func (st Status) summary(check, status string, since time.Time) ec2StatusSummary {
	failed := slices.Contains(st.Failed, check)
	if status == "" {
		status = "ok"
		if failed {
			status = "impaired"
		}
	}
	d := ec2StatusDetail{Name: "reachability", Status: "passed"}
	if failed {
		d.Status, d.ImpairedSince = "failed", ec2Time(since)
	}
	return ec2StatusSummary{Status: status, Details: []ec2StatusDetail{d}}
}

// ec2DescribeInstanceStatus answers as EC2 does: InstanceId.N names at most 100 instances,
// an unknown one fails the call, MaxResults cannot go with ids, and without
// IncludeAllInstances=true only running instances are reported.
func (s *Server) ec2DescribeInstanceStatus(p url.Values) (any, error) {
	if p.Get("DryRun") == "true" {
		return nil, &apiError{Status: http.StatusPreconditionFailed, Code: "DryRunOperation", Message: "Request would have succeeded, but DryRun flag is set."}
	}
	ids := listParam(p, "InstanceId")
	if len(ids) > 100 {
		return nil, errorf("InvalidParameterValue", "The maximum number of instance IDs is 100; %d given", len(ids))
	}
	if len(ids) > 0 && p.Get("MaxResults") != "" {
		return nil, errorf("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	all := p.Get("IncludeAllInstances") == "true"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unknownInstances(ids); err != nil {
		return nil, err
	}
	var selected []*Instance
	for _, in := range s.instances {
		if (len(ids) == 0 || slices.Contains(ids, in.ID)) && (all || in.State == "running") {
			selected = append(selected, in)
		}
	}
	start, end, next, err := ec2Paging.page(p, len(selected))
	if err != nil {
		return nil, err
	}
	resp := &ec2DescribeInstanceStatusResponse{NextToken: next}
	for _, in := range selected[start:end] {
		st := s.statuses[in.ID]
		out := ec2InstanceStatus{
			InstanceID: in.ID, AvailabilityZone: in.AvailabilityZone, StateCode: stateCodes[in.State], StateName: in.State,
			SystemStatus:   st.summary("system", st.System, st.ImpairedSince),
			InstanceStatus: st.summary("instance", st.Instance, st.ImpairedSince),
			EBSStatus:      st.summary("ebs", st.EBS, st.ImpairedSince),
		}
		for _, e := range st.Events {
			out.Events = append(out.Events, ec2StatusEvent{ID: e.ID, Code: e.Code, Description: e.Description,
				NotBefore: ec2Time(e.NotBefore), NotAfter: ec2Time(e.NotAfter)})
		}
		resp.Statuses = append(resp.Statuses, out)
	}
	return resp, nil
}

// asgSetInstanceHealth accepts Healthy or Unhealthy for an instance of a group, as Auto
// Scaling does, and counts the Unhealthy marks.
func (s *Server) asgSetInstanceHealth(p url.Values) (any, error) {
	id, health := p.Get("InstanceId"), p.Get("HealthStatus")
	if health != "Healthy" && health != "Unhealthy" {
		return nil, errorf("ValidationError", "Valid values for HealthStatus are Healthy and Unhealthy; %q given", health)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.instanceIndex(id)
	if i < 0 || s.instances[i].AutoScalingGroup == "" {
		return nil, errorf("ValidationError", "Instance Id not found - No managed instance found for instance ID: %s", id)
	}
	if health == "Unhealthy" {
		if s.unhealthy == nil {
			s.unhealthy = map[string]int{}
		}
		s.unhealthy[id]++
	}
	return &asgSetInstanceHealthResult{}, nil
}
