// SPDX-License-Identifier: Apache-2.0

// Package forget is `lifeboat forget`: it finds, and with Options.Apply removes, what Lifeboat
// wrote on Nodes (its record and notes, its labels, the interruption taints it recorded, its
// own cordon and its node condition), so that a cluster going back to aws-node-termination-
// handler, or giving Lifeboat up, keeps nothing of it. What Lifeboat cannot tell from an
// operator's (a cordon without Lifeboat's mark, a taint no record names) is kept, and said.
package forget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
)

// What an Item is.
const (
	WhatCordon     = "cordon"
	WhatAnnotation = "annotation"
	WhatLabel      = "label"
	WhatTaint      = "taint"
	WhatCondition  = "condition"
)

// interruptionTaints are NTH's taint keys, which Lifeboat puts on with the notice's id as
// their value.
var interruptionTaints = []string{notice.TaintSpotInterruption, notice.TaintScheduledMaintenance, notice.TaintASGLifecycle, notice.TaintRebalance}

// Item is one thing on a node: something Lifeboat wrote (to remove), or something that looks
// like it and is kept, with Why.
type Item struct {
	What   string `json:"what"`
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect,omitempty"`
	Why    string `json:"why,omitempty"`
}

// String is the item as the table shows it.
func (i Item) String() string {
	s := i.What + " " + i.Key
	if i.Value != "" {
		s += "=" + i.Value
	}
	if i.Effect != "" {
		s += ":" + i.Effect
	}
	if i.Why != "" {
		s += " (" + i.Why + ")"
	}
	return s
}

// Node is what forget finds on one node, and what came of it.
type Node struct {
	Name   string `json:"name"`
	Remove []Item `json:"remove"`
	Keep   []Item `json:"keep,omitempty"`
	// Removed says the items were removed (Options.Apply); false in a dry run.
	Removed bool   `json:"removed"`
	Error   string `json:"error,omitempty"`
}

// lenientRecord is what forget reads of the record: the notices whose taints are
// Lifeboat's, and whether an episode is open. Other fields, and their types, do not matter.
type lenientRecord struct {
	Notices  []string `json:"notices"`
	Released []string `json:"released"`
	Phase    string   `json:"phase"`
}

// Plan lists what Lifeboat wrote on the node, to remove, and what it keeps.
func Plan(n *corev1.Node) Node {
	p := Node{Name: n.Name, Remove: []Item{}}
	// Read leniently, not through record.Read: a record another release wrote, or one that
	// fails validation, is forgotten all the same. Unreadable, it names no notice.
	var rec lenientRecord
	_ = json.Unmarshal([]byte(n.Annotations[record.Annotation]), &rec)
	_, cordonMark := n.Annotations[nodes.AnnotationCordonedBy]
	switch {
	case n.Spec.Unschedulable && cordonMark:
		p.Remove = append(p.Remove, Item{What: WhatCordon, Key: "spec.unschedulable", Why: "made by Lifeboat: " + nodes.AnnotationCordonedBy})
	case n.Spec.Unschedulable:
		p.Keep = append(p.Keep, Item{What: WhatCordon, Key: "spec.unschedulable", Why: "not Lifeboat's: no " + nodes.AnnotationCordonedBy + " mark"})
	}
	for _, k := range sortedKeys(n.Annotations) {
		switch {
		case k == nodecondition.AnnotationVeto:
			p.Keep = append(p.Keep, Item{What: WhatAnnotation, Key: k, Value: n.Annotations[k], Why: "an operator's veto of node repair"})
		case strings.HasPrefix(k, nodes.AnnotationPrefix):
			p.Remove = append(p.Remove, Item{What: WhatAnnotation, Key: k})
		}
	}
	inEpisode := cordonMark || (rec.Phase != "" && len(rec.Notices) > 0)
	for _, k := range sortedKeys(n.Labels) {
		switch {
		case strings.HasPrefix(k, nodes.AnnotationPrefix):
			p.Remove = append(p.Remove, Item{What: WhatLabel, Key: k, Value: n.Labels[k]})
		case k == nodes.LabelExcludeFromLoadBalancers && inEpisode && n.Labels[k] == "true":
			p.Remove = append(p.Remove, Item{What: WhatLabel, Key: k, Value: n.Labels[k], Why: "put on with Lifeboat's episode"})
		case k == nodes.LabelExcludeFromLoadBalancers:
			p.Keep = append(p.Keep, Item{What: WhatLabel, Key: k, Value: n.Labels[k], Why: "no Lifeboat episode on the node: not Lifeboat's"})
		}
	}
	p.planTaints(n, rec)
	if nodes.ConditionOf(n, nodes.ConditionInterruption) != nil {
		p.Remove = append(p.Remove, Item{What: WhatCondition, Key: string(nodes.ConditionInterruption)})
	}
	return p
}

// planTaints sorts the node's interruption and out-of-service taints: Lifeboat's are those
// whose value is a notice its record names (the out-of-service taint: one it put on with the
// drained phase); any other is NTH's or an operator's.
func (p *Node) planTaints(n *corev1.Node, rec lenientRecord) {
	values := map[string]bool{}
	for _, id := range slices.Concat(rec.Notices, rec.Released) {
		values[nodes.LabelValue(id)] = true
	}
	for _, t := range n.Spec.Taints {
		item := Item{What: WhatTaint, Key: t.Key, Value: t.Value, Effect: string(t.Effect)}
		switch {
		case slices.Contains(interruptionTaints, t.Key) && values[t.Value]:
			p.Remove = append(p.Remove, item)
		case slices.Contains(interruptionTaints, t.Key):
			item.Why = "no Lifeboat record names " + t.Value + ": NTH's or an operator's"
			p.Keep = append(p.Keep, item)
		case t.Key == nodes.TaintOutOfService && t.Value == "nodeshutdown" && rec.Phase == "drained":
			item.Why = "put on when Lifeboat drained the node"
			p.Remove = append(p.Remove, item)
		case t.Key == nodes.TaintOutOfService:
			item.Why = "the record shows no drain of Lifeboat's: not Lifeboat's"
			p.Keep = append(p.Keep, item)
		}
	}
}

// edit removes from the node what Plan finds on it, decided again on the copy it is given
// (a retry after a conflict decides afresh); *removed is set to what it removed.
func edit(removed *[]Item) nodes.Edit {
	return func(n *corev1.Node) {
		p := Plan(n)
		*removed = p.Remove
		for _, i := range p.Remove {
			switch i.What {
			case WhatCordon:
				n.Spec.Unschedulable = false
			case WhatAnnotation:
				delete(n.Annotations, i.Key)
			case WhatLabel:
				delete(n.Labels, i.Key)
			case WhatTaint:
				n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool {
					return t.Key == i.Key && t.Value == i.Value && string(t.Effect) == i.Effect
				})
			}
		}
	}
}

// Permissions are the Kubernetes permissions forget needs, with Options.Apply (a dry run
// needs the first two): read the nodes, write their metadata and spec, and remove the
// condition from their status.
var Permissions = []authorizationv1.ResourceAttributes{
	{Resource: "nodes", Verb: "get"},
	{Resource: "nodes", Verb: "list"},
	{Resource: "nodes", Verb: "patch"},
	{Resource: "nodes", Subresource: "status", Verb: "patch"},
}

// Options say which nodes to look at, and whether to remove what is found.
type Options struct {
	// Nodes names the nodes; none means every node (or those Selector selects).
	Nodes []string
	// Selector is a label selector over the nodes, when no node is named.
	Selector string
	// Apply removes what is found; otherwise forget only says what it would remove.
	Apply bool
}

// Run finds on the selected nodes what Lifeboat wrote and, with o.Apply, removes it: metadata
// and spec in one conflict-safe write per node, then the node condition on the status. It goes
// on past a node it cannot read or write, and returns an error naming each such node. Only
// nodes with something found, and named nodes, are in the result.
func Run(ctx context.Context, client kubernetes.Interface, o Options) ([]Node, error) {
	if len(o.Nodes) > 0 && o.Selector != "" {
		return nil, errors.New("name nodes or give a selector, not both")
	}
	targets, errs := selectNodes(ctx, client, o)
	w := nodes.NewWriter(client)
	var out []Node
	for _, n := range targets {
		p := Plan(n)
		if len(p.Remove) == 0 && len(p.Keep) == 0 && len(o.Nodes) == 0 {
			continue
		}
		if o.Apply && len(p.Remove) > 0 {
			if err := p.remove(ctx, w, n); err != nil {
				p.Error = err.Error()
				errs = append(errs, err)
			}
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// remove writes the node without what Lifeboat wrote, then removes its condition. What it
// reports removed is what the write found on the node it wrote (or read fresh).
func (p *Node) remove(ctx context.Context, w *nodes.Writer, n *corev1.Node) error {
	var removed []Item
	res, err := w.Apply(ctx, n.Name, n, "forget what Lifeboat wrote", edit(&removed))
	if err != nil {
		return err
	}
	if slices.ContainsFunc(removed, func(i Item) bool { return i.What == WhatCondition }) {
		if _, err := w.RemoveCondition(ctx, n.Name, res.Node, nodes.ConditionInterruption); err != nil {
			return fmt.Errorf("node %s: its labels, annotations, taints and cordon are forgotten, its condition is not: %w", n.Name, err)
		}
	}
	p.Remove, p.Removed = removed, true
	return nil
}

// selectNodes reads the named nodes, or lists the nodes the selector selects (every node
// without one). A named node that cannot be read is an error naming it.
func selectNodes(ctx context.Context, client kubernetes.Interface, o Options) ([]*corev1.Node, []error) {
	if len(o.Nodes) == 0 {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: o.Selector})
		if err != nil {
			return nil, []error{fmt.Errorf("list nodes: %w", err)}
		}
		out := make([]*corev1.Node, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out, nil
	}
	var (
		out  []*corev1.Node
		errs []error
	)
	for _, name := range o.Nodes {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", name, err))
			continue
		}
		out = append(out, n)
	}
	return out, errs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
