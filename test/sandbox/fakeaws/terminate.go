// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"encoding/xml"
	"net/url"
)

// SetInstanceState sets an instance's EC2 state (running, stopping, stopped, shutting-down,
// terminated), as DescribeInstances reports it.
func (s *Server) SetInstanceState(id, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.instanceIndex(id); i >= 0 {
		s.instances[i].State = state
	}
}

// Terminations counts the TerminateInstances calls that named an instance.
func (s *Server) Terminations(id string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Action != "TerminateInstances" {
			continue
		}
		for k, v := range c.Params {
			if len(k) > len("InstanceId.") && k[:len("InstanceId.")] == "InstanceId." && len(v) > 0 && v[0] == id {
				n++
			}
		}
	}
	return n
}

type ec2TerminateInstancesResponse struct {
	XMLName xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ TerminateInstancesResponse"`
	ec2Meta
	Changes []ec2StateChange `xml:"instancesSet>item"`
}

type ec2StateChange struct {
	InstanceID string      `xml:"instanceId"`
	Current    ec2StateXML `xml:"currentState"`
	Previous   ec2StateXML `xml:"previousState"`
}

type ec2StateXML struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

// ec2TerminateInstances moves each named instance to shutting-down (DescribeInstances then
// reports it so); an unknown id fails the call, as EC2 does.
func (s *Server) ec2TerminateInstances(p url.Values) (any, error) {
	ids := listParam(p, "InstanceId")
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &ec2TerminateInstancesResponse{}
	for _, id := range ids {
		i := s.instanceIndex(id)
		if i < 0 {
			return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
		prev := s.instances[i].State
		s.instances[i].State = "shutting-down"
		out.Changes = append(out.Changes, ec2StateChange{InstanceID: id,
			Current: ec2StateXML{Code: stateCodes["shutting-down"], Name: "shutting-down"}, Previous: ec2StateXML{Code: stateCodes[prev], Name: prev}})
	}
	return out, nil
}
