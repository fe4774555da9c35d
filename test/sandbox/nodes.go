// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// KwokNodeAnnotation marks a Node that kwok plays the kubelet for.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// NodeSpec describes a fake EC2-backed node. Zero fields are filled from Index.
type NodeSpec struct {
	Index        int    // distinguishes generated names, addresses and instance ids
	Name         string // default ip-10-0-<i/256>-<i%256>.ec2.internal, as EC2 names nodes
	InstanceID   string // default i-<17 hex digits from Index>
	Zone         string // default us-east-1a
	InstanceType string // default m5.large
	PrivateIP    string // default 10.0.<i/256>.<i%256>
	// NoProviderID registers the Node without spec.providerID, as a kubelet started before
	// the cloud controller initialised it does (or in a cluster without one).
	NoProviderID bool
	Labels       map[string]string
	Taints       []corev1.Taint
}

func (s NodeSpec) withDefaults() NodeSpec {
	if s.PrivateIP == "" {
		s.PrivateIP = fmt.Sprintf("10.0.%d.%d", s.Index/256, s.Index%256)
	}
	if s.Name == "" {
		s.Name = fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", s.Index/256, s.Index%256)
	}
	if s.InstanceID == "" {
		s.InstanceID = fmt.Sprintf("i-%017x", 0xa000000+s.Index)
	}
	if s.Zone == "" {
		s.Zone = "us-east-1a"
	}
	if s.InstanceType == "" {
		s.InstanceType = "m5.large"
	}
	return s
}

// ProviderID is the node's spec.providerID, as the AWS cloud provider writes it.
func (s NodeSpec) ProviderID() string {
	s = s.withDefaults()
	return fmt.Sprintf("aws:///%s/%s", s.Zone, s.InstanceID)
}

func (s NodeSpec) nodeProviderID() string {
	if s.NoProviderID {
		return ""
	}
	return s.ProviderID()
}

// Node builds the Node object for the spec.
func (s NodeSpec) Node() *corev1.Node {
	s = s.withDefaults()
	labels := map[string]string{
		"kubernetes.io/hostname":           s.Name,
		"kubernetes.io/os":                 "linux",
		"topology.kubernetes.io/zone":      s.Zone,
		"node.kubernetes.io/instance-type": s.InstanceType,
		"type":                             "kwok",
	}
	for k, v := range s.Labels {
		labels[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: labels, Annotations: map[string]string{KwokNodeAnnotation: "fake"}},
		Spec:       corev1.NodeSpec{ProviderID: s.nodeProviderID(), Taints: s.Taints},
		Status: corev1.NodeStatus{
			// Set explicitly: otherwise kwok gives every node the same address.
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: s.PrivateIP},
				{Type: corev1.NodeHostName, Address: s.Name},
				{Type: corev1.NodeInternalDNS, Address: s.Name},
			},
			Capacity: capacity, Allocatable: capacity,
		},
	}
}

// AddNodes creates the nodes and waits until kwok reports each Ready.
func (c *Cluster) AddNodes(ctx context.Context, specs ...NodeSpec) ([]*corev1.Node, error) {
	nodes := make([]*corev1.Node, 0, len(specs))
	for _, s := range specs {
		n, err := c.Client.CoreV1().Nodes().Create(ctx, s.Node(), metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create node %s: %w", s.withDefaults().Name, err)
		}
		// Status is ignored on create; write the addresses through the status subresource,
		// from a fresh read each time because kwok may be initialising the status meanwhile.
		want, name := s.Node().Status, n.Name
		err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			fresh, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			fresh.Status.Addresses, fresh.Status.Capacity, fresh.Status.Allocatable = want.Addresses, want.Capacity, want.Allocatable
			updated, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, fresh, metav1.UpdateOptions{})
			if err == nil {
				n = updated
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("set status of node %s: %w", name, err)
		}
		nodes = append(nodes, n)
	}
	if c.opts.NoKwok {
		return nodes, nil
	}
	for i, n := range nodes {
		ready, err := c.WaitNodeReady(ctx, n.Name, 30*time.Second)
		if err != nil {
			return nil, err
		}
		if !c.opts.ControllerManager {
			if ready, err = c.removeNotReadyTaint(ctx, n.Name); err != nil {
				return nil, err
			}
		}
		nodes[i] = ready
	}
	return nodes, nil
}

// removeNotReadyTaint does what the node lifecycle controller does once a node is Ready:
// admission adds node.kubernetes.io/not-ready at creation, and without a controller manager
// nothing would remove it.
func (c *Cluster) removeNotReadyTaint(ctx context.Context, name string) (*corev1.Node, error) {
	var node *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept := n.Spec.Taints[:0]
		for _, t := range n.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(n.Spec.Taints) {
			node = n
			return nil
		}
		n.Spec.Taints = kept
		// Update carries the read resourceVersion, so a concurrent writer causes a retry.
		node, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("remove not-ready taint from %s: %w", name, err)
	}
	return node, nil
}

// WaitNodeReady waits until the node's Ready condition is True.
func (c *Cluster) WaitNodeReady(ctx context.Context, name string, timeout time.Duration) (*corev1.Node, error) {
	var node *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		return IsNodeReady(n), nil
	})
	if err != nil {
		return nil, fmt.Errorf("node %s not Ready after %s: %w", name, timeout, err)
	}
	return node, nil
}

// IsNodeReady reports whether the node's Ready condition is True.
func IsNodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
