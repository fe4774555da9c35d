// SPDX-License-Identifier: Apache-2.0

package nodes

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/notice"
)

// Lifeboat's bookkeeping on the Node lives under this prefix.
const AnnotationPrefix = "lifeboat.dev/"

// AnnotationCordonedBy marks a cordon that Lifeboat made, so Uncordon undoes only its own.
const AnnotationCordonedBy = AnnotationPrefix + "cordoned"

// The interruption taint keys, as NTH names them, so users' tolerations keep working.
const (
	TaintSpotInterruption     = notice.TaintSpotInterruption
	TaintScheduledMaintenance = notice.TaintScheduledMaintenance
	TaintASGLifecycle         = notice.TaintASGLifecycle
	TaintRebalance            = notice.TaintRebalance
	// TaintOutOfService tells Kubernetes the node is shut down, so volumes detach at once.
	TaintOutOfService = "node.kubernetes.io/out-of-service"
)

// LabelUncordonAfterReboot marks a node cordoned for a scheduled reboot: Lifeboat uncordons
// it once it has rebooted.
const LabelUncordonAfterReboot = AnnotationPrefix + "uncordon-after-reboot"

// LabelExcludeFromLoadBalancers takes the node out of external load balancers' targets.
const LabelExcludeFromLoadBalancers = "node.kubernetes.io/exclude-from-external-load-balancers"

// Cordon marks the node unschedulable and remembers that Lifeboat did it. A node that was
// already cordoned (by a person or another tool) is left as it is, unmarked, so Uncordon
// will not undo someone else's cordon.
func Cordon() Edit {
	return func(n *corev1.Node) {
		if n.Spec.Unschedulable {
			return
		}
		n.Spec.Unschedulable = true
		setAnnotation(n, AnnotationCordonedBy, "true")
	}
}

// Uncordon undoes a cordon that Lifeboat made; any other cordon stays.
func Uncordon() Edit {
	return func(n *corev1.Node) {
		if _, ours := n.Annotations[AnnotationCordonedBy]; !ours {
			return
		}
		n.Spec.Unschedulable = false
		delete(n.Annotations, AnnotationCordonedBy)
	}
}

// AddTaint adds the taint, or updates the value of a taint with the same key and effect.
func AddTaint(key, value string, effect corev1.TaintEffect) Edit {
	return func(n *corev1.Node) {
		for i, t := range n.Spec.Taints {
			if t.Key == key && t.Effect == effect {
				n.Spec.Taints[i].Value = value
				return
			}
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// RemoveTaint removes taints with the key (and effect, unless effect is empty).
func RemoveTaint(key string, effect corev1.TaintEffect) Edit {
	return func(n *corev1.Node) {
		kept := make([]corev1.Taint, 0, len(n.Spec.Taints))
		for _, t := range n.Spec.Taints {
			if t.Key != key || (effect != "" && t.Effect != effect) {
				kept = append(kept, t)
			}
		}
		n.Spec.Taints = kept
	}
}

// SetLabel sets a label.
func SetLabel(key, value string) Edit {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[key] = value
	}
}

// RemoveLabel removes a label.
func RemoveLabel(key string) Edit { return func(n *corev1.Node) { delete(n.Labels, key) } }

// SetAnnotation sets an annotation.
func SetAnnotation(key, value string) Edit {
	return func(n *corev1.Node) { setAnnotation(n, key, value) }
}

// RemoveAnnotation removes an annotation.
func RemoveAnnotation(key string) Edit { return func(n *corev1.Node) { delete(n.Annotations, key) } }

func setAnnotation(n *corev1.Node, key, value string) {
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[key] = value
}

var notLabelSafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// LabelValue makes s usable as a label or taint value: at most 63 characters of
// [A-Za-z0-9._-], starting and ending with an alphanumeric character.
func LabelValue(s string) string {
	s = notLabelSafe.ReplaceAllString(s, "-")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.TrimRight(strings.TrimLeft(s, "._-"), "._-")
}
