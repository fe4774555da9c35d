// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"encoding/xml"
	"net/url"
	"slices"
)

func init() {
	// Reboots (node repair's reboot step): registered here, beside what answers them.
	ec2Actions["RebootInstances"] = (*Server).ec2RebootInstances
}

// Reboots counts the RebootInstances calls that named an instance and were answered without
// an error. The fake changes nothing else: a test plays the reboot on the Node (its boot ID,
// its conditions) as the instance would.
func (s *Server) Reboots(id string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Action == "RebootInstances" && slices.Contains(listParam(c.Params, "InstanceId"), id) && c.ErrorCode == "" {
			n++
		}
	}
	return n
}

type ec2RebootInstancesResponse struct {
	XMLName xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ RebootInstancesResponse"`
	ec2Meta
	Return bool `xml:"return"`
}

// ec2RebootInstances accepts a reboot of known instances that run; an unknown id fails the
// call, as EC2 does, and so does one that is not running.
func (s *Server) ec2RebootInstances(p url.Values) (any, error) {
	ids := listParam(p, "InstanceId")
	if len(ids) == 0 {
		return nil, errorf("MissingParameter", "The request must contain the parameter InstanceId")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		i := s.instanceIndex(id)
		if i < 0 {
			return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
		if st := s.instances[i].State; st != "" && st != "running" {
			return nil, errorf("IncorrectState", "The instance '%s' is not in a state from which it can be rebooted (%s)", id, st)
		}
	}
	return &ec2RebootInstancesResponse{Return: true}, nil
}
