// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"strings"

	"lifeboat.dev/lifeboat/internal/notice"
)

// nthIMDSMonitors are NTH's monitor names in IMDS mode, by NTH kind; in queue mode every
// notice comes from NTH's SQS_MONITOR.
var nthIMDSMonitors = map[string]string{
	"SPOT_ITN":                 "SPOT_ITN_MONITOR",
	"SCHEDULED_EVENT":          "SCHEDULED_EVENT_MONITOR",
	"REBALANCE_RECOMMENDATION": "REBALANCE_RECOMMENDATION_MONITOR",
	"ASG_LIFECYCLE":            "ASG_LIFECYCLE_MONITOR",
}

// asNTH gives n NTH's kind and monitor names; values it has no NTH name for stay as they are.
func asNTH(n Notification) Notification {
	rules, ok := notice.RulesOf(notice.Kind(n.Kind))
	kind := rules.NTHKind
	if !ok || kind == "" {
		return n
	}
	n.Kind = kind
	switch n.Monitor {
	case "queue":
		n.Monitor = "SQS_MONITOR"
	case "imds":
		if m, ok := nthIMDSMonitors[kind]; ok {
			n.Monitor = m
		}
	}
	return n
}

// withPlacement fills AvailabilityZone and Region from the providerID
// (aws:///<zone>/<instance>) when they are not given.
func withPlacement(n Notification) Notification {
	if n.AvailabilityZone == "" {
		if rest, ok := strings.CutPrefix(n.ProviderID, "aws:///"); ok {
			if zone, _, ok := strings.Cut(rest, "/"); ok {
				n.AvailabilityZone = zone
			}
		}
	}
	if n.Region == "" && len(n.AvailabilityZone) > 1 {
		// A zone is its region and a letter (us-east-1a); Local Zones and Wavelength zones
		// carry more after the region (us-east-1-bos-1a), so the region is cut at its number.
		n.Region = regionOf(n.AvailabilityZone)
	}
	return n
}

// regionOf is the region of an Availability Zone name: its first three dash-separated words
// with the zone letter removed (us-east-1a -> us-east-1, us-east-1-bos-1a -> us-east-1).
func regionOf(zone string) string {
	words := strings.SplitN(zone, "-", 4)
	if len(words) < 3 {
		return ""
	}
	last := strings.TrimRight(words[2], "abcdefghijklmnopqrstuvwxyz")
	if last == "" {
		return ""
	}
	return strings.Join([]string{words[0], words[1], last}, "-")
}
