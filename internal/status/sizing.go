// SPDX-License-Identifier: Apache-2.0

package status

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// AnnotationBelowSizing marks a controller Deployment whose resources are below what the
// controller is sized for (the chart keeps them as the values wrote them, and says why in
// the annotation's value); a label of the same key, "true", lets status find it.
const AnnotationBelowSizing = "lifeboat.dev/resources-below-sizing"

// BelowSizing is a controller Deployment whose resources are below its sizing.
type BelowSizing struct {
	Deployment string `json:"deployment"` // namespace/name
	Why        string `json:"why"`
}

// belowSizing lists the controller Deployments marked below their sizing, in any namespace
// (one list, by label). A reader not allowed to list Deployments gets none: the rest of the
// report does not depend on it.
func belowSizing(ctx context.Context, client kubernetes.Interface) ([]BelowSizing, error) {
	list, err := client.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: AnnotationBelowSizing})
	if apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list Deployments labelled %s: %w", AnnotationBelowSizing, err)
	}
	var out []BelowSizing
	for _, d := range list.Items {
		out = append(out, BelowSizing{Deployment: d.Namespace + "/" + d.Name, Why: d.Annotations[AnnotationBelowSizing]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Deployment < out[j].Deployment })
	return out, nil
}
