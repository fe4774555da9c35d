// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"strings"

	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// ShippedKinds are the EventBridge events deploy/aws ships a rule for (messages.EventKinds),
// for fakeaws.Server.ShipSetup.
func ShippedKinds() []fakeaws.EventKind {
	var out []fakeaws.EventKind
	for _, k := range messages.EventKinds() {
		out = append(out, fakeaws.EventKind{Name: k.Name, Source: k.Source, DetailTypes: k.DetailTypes})
	}
	return out
}

// QueueARN is the ARN of the sandbox's queue at url (http://host:port/account/name).
func QueueARN(url string) string {
	parts := strings.Split(strings.TrimRight(url, "/"), "/")
	if len(parts) < 2 {
		return ""
	}
	return "arn:aws:sqs:us-east-1:" + parts[len(parts)-2] + ":" + parts[len(parts)-1]
}
