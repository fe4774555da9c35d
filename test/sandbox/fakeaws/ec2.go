// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"encoding/xml"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

const (
	asgGroupTag = "aws:autoscaling:groupName"
	ownerID     = "123456789012"
)

// stateCodes are EC2's numeric instance state codes.
var stateCodes = map[string]int{
	"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80,
}

type ec2DescribeInstancesResponse struct {
	XMLName xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeInstancesResponse"`
	ec2Meta
	Reservations []ec2Reservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

type ec2Reservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []ec2Instance `xml:"instancesSet>item"`
}

type ec2Instance struct {
	InstanceID       string   `xml:"instanceId"`
	InstanceType     string   `xml:"instanceType,omitempty"`
	PrivateDNSName   string   `xml:"privateDnsName,omitempty"`
	PrivateIPAddress string   `xml:"privateIpAddress,omitempty"`
	AvailabilityZone string   `xml:"placement>availabilityZone,omitempty"`
	StateCode        int      `xml:"instanceState>code"`
	StateName        string   `xml:"instanceState>name"`
	Tags             []ec2Tag `xml:"tagSet>item"`
	// CapacityReservationID is the capacity reservation the instance runs in.
	CapacityReservationID string `xml:"capacityReservationId,omitempty"`
}

type ec2Tag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type ec2DescribeTagsResponse struct {
	XMLName xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeTagsResponse"`
	ec2Meta
	Tags      []ec2TagDescription `xml:"tagSet>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

type ec2TagDescription struct {
	ResourceID   string `xml:"resourceId"`
	ResourceType string `xml:"resourceType"`
	Key          string `xml:"key"`
	Value        string `xml:"value"`
}

// instanceTags returns the tags EC2 reports for in, including the one Auto
// Scaling puts on the instances it launches.
func instanceTags(in *Instance) map[string]string {
	tags := cloneMap(in.Tags)
	if in.AutoScalingGroup != "" {
		if tags == nil {
			tags = map[string]string{}
		}
		if _, ok := tags[asgGroupTag]; !ok {
			tags[asgGroupTag] = in.AutoScalingGroup
		}
	}
	return tags
}

// ec2InstanceFilter returns the attribute values a DescribeInstances filter
// compares against, or false for a filter EC2 would reject.
func ec2InstanceFilter(name string) (func(*Instance) []string, bool) {
	one := func(get func(*Instance) string) func(*Instance) []string {
		return func(in *Instance) []string { return []string{get(in)} }
	}
	switch name {
	case "instance-id":
		return one(func(in *Instance) string { return in.ID }), true
	case "private-dns-name":
		return one(func(in *Instance) string { return in.PrivateDNSName }), true
	case "private-ip-address":
		return one(func(in *Instance) string { return in.PrivateIP }), true
	case "instance-state-name":
		return one(func(in *Instance) string { return in.State }), true
	case "instance-type":
		return one(func(in *Instance) string { return in.InstanceType }), true
	case "capacity-reservation-id":
		return one(func(in *Instance) string { return in.CapacityReservationID }), true
	case "availability-zone":
		return one(func(in *Instance) string { return in.AvailabilityZone }), true
	case "tag-key":
		return func(in *Instance) []string { return slices.Collect(maps.Keys(instanceTags(in))) }, true
	}
	if key, ok := strings.CutPrefix(name, "tag:"); ok {
		return func(in *Instance) []string {
			if v, ok := instanceTags(in)[key]; ok {
				return []string{v}
			}
			return nil
		}, true
	}
	return nil, false
}

func (s *Server) ec2DescribeInstances(p url.Values) (any, error) {
	if p.Get("DryRun") == "true" {
		// EC2's answer to a permitted dry run (a denied one fails earlier, see Deny).
		return nil, &apiError{Status: http.StatusPreconditionFailed, Code: "DryRunOperation", Message: "Request would have succeeded, but DryRun flag is set."}
	}
	ids := listParam(p, "InstanceId")
	if len(ids) > 0 && p.Get("MaxResults") != "" {
		return nil, errorf("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	type check struct {
		values   func(*Instance) []string
		patterns []string
	}
	var checks []check
	for _, f := range parseFilters(p, "Filter", "Value") {
		get, ok := ec2InstanceFilter(f.Name)
		if !ok {
			return nil, errorf("InvalidParameterValue", "The filter '%s' is invalid", f.Name)
		}
		checks = append(checks, check{get, f.Values})
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// Like EC2, an unknown ID fails the whole call rather than being skipped.
	if err := s.unknownInstances(ids); err != nil {
		return nil, err
	}

	var selected []*Instance
	for _, in := range s.instances {
		if len(ids) > 0 && !slices.Contains(ids, in.ID) {
			continue
		}
		if !slices.ContainsFunc(checks, func(c check) bool {
			return !anyMatch(c.values(in), c.patterns, wildcardMatch)
		}) {
			selected = append(selected, in)
		}
	}
	start, end, next, err := ec2Paging.page(p, len(selected))
	if err != nil {
		return nil, err
	}
	resp := &ec2DescribeInstancesResponse{NextToken: next}
	for _, in := range selected[start:end] {
		// One reservation per instance: the fake does not model launches.
		resp.Reservations = append(resp.Reservations, ec2Reservation{
			ReservationID: "r-" + strings.TrimPrefix(in.ID, "i-"),
			OwnerID:       ownerID,
			Instances:     []ec2Instance{toEC2Instance(in)},
		})
	}
	return resp, nil
}

func toEC2Instance(in *Instance) ec2Instance {
	out := ec2Instance{
		InstanceID:            in.ID,
		InstanceType:          in.InstanceType,
		PrivateDNSName:        in.PrivateDNSName,
		PrivateIPAddress:      in.PrivateIP,
		AvailabilityZone:      in.AvailabilityZone,
		StateCode:             stateCodes[in.State],
		StateName:             in.State,
		CapacityReservationID: in.CapacityReservationID,
	}
	tags := instanceTags(in)
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out.Tags = append(out.Tags, ec2Tag{Key: k, Value: tags[k]})
	}
	return out
}

func (s *Server) ec2DescribeTags(p url.Values) (any, error) {
	filters := parseFilters(p, "Filter", "Value")
	for _, f := range filters {
		switch f.Name {
		case "resource-id", "resource-type", "key", "value":
		default:
			return nil, errorf("InvalidParameterValue", "The filter '%s' is invalid", f.Name)
		}
	}

	s.mu.Lock()
	var all []ec2TagDescription
	for _, in := range s.instances {
		tags := instanceTags(in)
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			all = append(all, ec2TagDescription{ResourceID: in.ID, ResourceType: "instance", Key: k, Value: tags[k]})
		}
	}
	s.mu.Unlock()

	var selected []ec2TagDescription
	for _, t := range all {
		attrs := map[string]string{"resource-id": t.ResourceID, "resource-type": t.ResourceType, "key": t.Key, "value": t.Value}
		if !slices.ContainsFunc(filters, func(f filter) bool {
			return !anyMatch([]string{attrs[f.Name]}, f.Values, wildcardMatch)
		}) {
			selected = append(selected, t)
		}
	}
	start, end, next, err := ec2Paging.page(p, len(selected))
	if err != nil {
		return nil, err
	}
	return &ec2DescribeTagsResponse{Tags: selected[start:end], NextToken: next}, nil
}

// unknownInstances fails, as EC2 does, a call naming any instance it does not know: the whole
// call, not just those. The caller holds s.mu.
func (s *Server) unknownInstances(ids []string) error {
	var missing []string
	for _, id := range ids {
		if s.instanceIndex(id) < 0 {
			missing = append(missing, id)
		}
	}
	switch {
	case len(missing) == 1:
		return errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	case len(missing) > 1:
		return errorf("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
	}
	return nil
}
