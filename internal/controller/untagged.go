// SPDX-License-Identifier: Apache-2.0

package controller

// untaggedFix says how to have such notices acted on.
func untaggedFix(clusterName string) string {
	fix := "tag the instance (its Auto Scaling group's tags, propagated at launch) with MANAGED_TAG"
	if clusterName != "" {
		fix += " and kubernetes.io/cluster/" + clusterName + "=owned"
	}
	return fix + ", or set CHECK_TAG_BEFORE_DRAINING=false to act on this cluster's nodes whatever their tags"
}
