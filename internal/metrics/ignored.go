// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

func newIgnoredMessages() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifeboat_queue_messages_ignored_total",
		Help: "Queue messages recognised and deleted with nothing to act on (also counted as lifeboat_queue_messages_total outcome ignored), by kind and reason: " +
			"capacity_block_delivered, capacity_reservation_state, capacity_reservation_reclaimed, health (other_service, informational_category, instance_stays, no_instance), state_change, asg_test_notification, sns; " +
			"capacity_block_expiration when EC2 contradicts the warning (extended, not_capacity_block, not_active, reservation_not_found) or the block runs no instance of this cluster (no_instance_of_ours); unknown (unknown_kind: a kind Lifeboat does not know, its rule logged).",
	}, []string{"kind", "reason"})
	return c
}

// IgnoredAtZero starts at 0 the series of every (kind, reason) the queue's parser can ignore
// a message for; the parser's owner hands them over (messages.IgnoredLabels), so that the
// first ignored message of a kind shows in increase().
func (m *Metrics) IgnoredAtZero(labels [][2]string) {
	if m == nil {
		return
	}
	for _, l := range labels {
		m.ignoredMessages.WithLabelValues(labelValue(l[0]), labelValue(l[1]))
	}
}

// QueueMessageIgnored counts a message deleted with nothing to act on, by kind and reason
// (messages.Ignore*, messages.Reason*).
func (m *Metrics) QueueMessageIgnored(kind, reason string) {
	if m != nil {
		m.ignoredMessages.WithLabelValues(labelValue(kind), labelValue(reason)).Inc()
	}
}
