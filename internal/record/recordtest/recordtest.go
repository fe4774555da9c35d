// SPDX-License-Identifier: Apache-2.0

// Package recordtest builds Node records and nodes that carry them, for tests.
package recordtest

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// Instance is the instance of the node NodeWith builds.
const Instance = "i-0123456789abcdef0"

// Good is a record as Lifeboat writes it for a termination hook being drained.
func Good() record.Record {
	id := notice.ID(notice.ASGTermination, Instance, notice.TokenDigest("t"))
	return record.Record{Version: record.Version, BootID: "b1", Notices: []string{id}, Phase: record.PhaseDraining,
		Deadline: time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC),
		Intents: []record.Intent{{ID: id, Kind: string(notice.ASGTermination), Source: string(notice.SourceQueue), InstanceID: Instance,
			Origin: "queue https://sqs.us-east-1.amazonaws.com/000000000000/lifeboat", Lifecycle: &record.Lifecycle{Group: "workers", Hook: "drain"}}},
		Owner:  &record.Owner{Origin: "queue https://sqs.us-east-1.amazonaws.com/000000000000/lifeboat", Holder: "lifeboat-0/1"},
		Held:   []string{"db/primary"},
		Detach: &record.Detach{Claims: []string{"db/data-primary"}, PodIPs: []string{"10.0.0.7"}},
	}
}

// NodeWith is a cordoned node of Instance, booted as b1, with the record annotation.
func NodeWith(annotation string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{record.Annotation: annotation}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + Instance, Unschedulable: true}}
	n.Status.NodeInfo.BootID = "b1"
	return n
}

// Encode is r as JSON.
func Encode(t testing.TB, r record.Record) string {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
