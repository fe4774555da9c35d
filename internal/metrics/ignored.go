// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

func newIgnoredMessages() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifeboat_queue_messages_ignored_total",
		Help: "Queue messages recognised and deleted with nothing to act on (also counted as lifeboat_queue_messages_total outcome ignored), by kind and reason: " +
			"capacity_block_delivered, capacity_reservation_state, capacity_reservation_reclaimed, health (other_service, informational_category, instance_stays, no_instance), state_change, asg_test_notification, sns; " +
			"capacity_block_expiration when EC2 contradicts the warning (extended, not_capacity_block, not_active, reservation_not_found) or the block runs no instance of this cluster (no_instance_of_ours); unknown (unknown_kind: a kind Lifeboat does not know, its rule logged).",
	}, []string{"kind", "reason"})
	for _, l := range messages.IgnoredLabels() {
		c.WithLabelValues(l[0], l[1])
	}
	return c
}

// QueueMessageIgnored counts a message deleted with nothing to act on, by kind and reason
// (messages.Ignore*, messages.Reason*).
func (m *Metrics) QueueMessageIgnored(kind, reason string) {
	if m != nil {
		m.ignoredMessages.WithLabelValues(labelValue(kind), labelValue(reason)).Inc()
	}
}
