// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template/parse"
	"time"
)

// Notification is the data a webhook template sees. Field names are NTH's, so an NTH
// template renders unchanged.
type Notification struct {
	EventID              string
	Kind                 string
	Monitor              string
	Description          string
	State                string
	NodeName             string
	InstanceID           string
	ProviderID           string
	InstanceType         string
	AutoScalingGroupName string
	// AvailabilityZone and Region come from ProviderID when not given (NTH took them from
	// instance metadata).
	AvailabilityZone string
	Region           string
	StartTime        time.Time
	EndTime          time.Time
	Pods             []string
	NodeLabels       map[string]string
}

// notificationField is n's field called name. Reading it through reflection would copy the
// whole notification on every read, the commonest command of a template.
func notificationField(n *Notification, name string) (any, bool) {
	switch name {
	case "EventID":
		return n.EventID, true
	case "Kind":
		return n.Kind, true
	case "Monitor":
		return n.Monitor, true
	case "Description":
		return n.Description, true
	case "State":
		return n.State, true
	case "NodeName":
		return n.NodeName, true
	case "InstanceID":
		return n.InstanceID, true
	case "ProviderID":
		return n.ProviderID, true
	case "InstanceType":
		return n.InstanceType, true
	case "AutoScalingGroupName":
		return n.AutoScalingGroupName, true
	case "AvailabilityZone":
		return n.AvailabilityZone, true
	case "Region":
		return n.Region, true
	case "StartTime":
		return n.StartTime, true
	case "EndTime":
		return n.EndTime, true
	case "Pods":
		return n.Pods, true
	case "NodeLabels":
		return n.NodeLabels, true
	}
	return nil, false
}

// JSON encodes v as JSON, for templates that build a JSON body: {{ .JSON .Description }}
// yields a quoted, escaped string whatever the description holds. Inside {{ range }} the
// method is reached as {{ $.JSON . }}. HTML characters are left as they are (they are valid
// in JSON strings and read better in chat messages).
func (Notification) JSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

const (
	// MaxBodyBytes bounds a rendered body; a template that writes more fails instead of
	// sending a truncated (and, for JSON, invalid) body.
	MaxBodyBytes = 128 << 10
	// maxSteps bounds the work of one render: each range iteration and each template call
	// is a step. A real template ranges over a node's pods and labels (hundreds of steps);
	// {{ range .StartTime.Unix }} would otherwise loop for minutes without writing a byte.
	maxSteps = 10000
	// maxNesting bounds how deep loops and template calls nest, and with it the
	// evaluator's recursion; no webhook message needs more.
	maxNesting = 50
	// maxRenderBytes bounds what one render allocates besides its body, by the evaluator's own
	// count: each command it evaluates, each function it calls and each value a call makes.
	// maxSteps bounds loops and MaxBodyBytes the output; this bounds the work in between, such
	// as a loop that makes a large value and drops it on every pass.
	maxRenderBytes = 32 * MaxBodyBytes
	// What the evaluator counts for its own allocations: a command (its value, a variable), a
	// call (its arguments and results), and each list element or map entry a call makes.
	commandCost = 64
	callCost    = 512
	itemCost    = 32
)

var errTooLarge = fmt.Errorf("WEBHOOK_TEMPLATE: rendered body exceeds %d bytes", MaxBodyBytes)

// Template is a parsed webhook template.
//
// It is Go template syntax with text/template's built-in functions (print, printf, len,
// index, eq, ...) and sprig's hermetic ones (upper, join, default, toJson, ...; sprig.go),
// none of which can read files, the environment or the network; a template asking for one
// (env, expandenv, readFile, ...) does not parse, and the error says why. A template reaches
// the fields of Notification, its JSON method and common time.Time methods (see eval.go).
// Rendering is bounded in output (MaxBodyBytes), in loops (maxSteps) and in memory: a function
// whose result would pass MaxBodyBytes is refused before it runs (growth.go, printf.go), and a
// render's commands, calls and the values they make are bounded together (maxRenderBytes). A
// missing map key is an error rather than the text "<no value>" (use
// {{ index .NodeLabels "key" }} for labels that may be absent).
//
// Values are written as they are. A template that builds JSON should pass them through
// {{ .JSON ... }} so that quotes and newlines in, say, a description keep the body valid;
// the default template does.
type Template struct {
	trees map[string]*parse.Tree
}

const templateName = "WEBHOOK_TEMPLATE"

// ParseTemplate parses text and renders it with a sample notification and with the largest
// notification a node can bring, so an unknown field, a runaway loop or a body that grows past
// the limit with a large node's data is found at start rather than at an interruption.
func ParseTemplate(text string) (*Template, error) {
	trees, err := parse.Parse(templateName, text, "", "", functionNames())
	if err != nil {
		return nil, fmt.Errorf("WEBHOOK_TEMPLATE: not a valid Go template: %w", explainUndefined(err))
	}
	if err := limitNesting(trees); err != nil {
		return nil, err
	}
	t := &Template{trees: trees}
	// Labels differ per node, so the sample run tolerates missing keys; everything else
	// (unknown fields, wrong arguments, too much output or work) fails here.
	if _, err := t.render(sampleNotification(), true); err != nil {
		return nil, fmt.Errorf("WEBHOOK_TEMPLATE: fails on a sample notification: %w", err)
	}
	if _, err := t.render(worstCaseNotification(), true); err != nil {
		return nil, fmt.Errorf("WEBHOOK_TEMPLATE: fails on the largest notification a node can bring (%d pods, %d labels, a %d-byte description): %w",
			worstPods, worstLabels, worstDescription, err)
	}
	return t, nil
}

// Render executes the template for n. The result is at most MaxBodyBytes long.
func (t *Template) Render(n Notification) ([]byte, error) {
	b, err := t.render(n, false)
	if err != nil && !errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("WEBHOOK_TEMPLATE: %w", err)
	}
	return b, err
}

func (t *Template) render(n Notification, missingKeyZero bool) (_ []byte, err error) {
	// A fault in the evaluator fails this webhook, never the process that drains the nodes.
	// (The differential fuzz test calls execute itself, so that it still sees such faults.)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the template could not be rendered: %v", r)
		}
	}()
	out := &boundedBuffer{max: MaxBodyBytes}
	if err := execute(t.trees, templateName, out, n, missingKeyZero); err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, errTooLarge
		}
		return nil, err
	}
	return out.b.Bytes(), nil
}

// limitNesting rejects a template that calls itself, directly or not, or that nests loops
// and template calls more than maxNesting deep. Template names in {{ template }} are
// constants, so this is decided on the parse trees.
func limitNesting(trees map[string]*parse.Tree) error {
	n := &nesting{trees: trees, state: map[string]int{}, depth: map[string]int{}}
	for name := range trees {
		if _, err := n.ofTemplate(name); err != nil {
			return err
		}
	}
	return nil
}

// States of a template in the nesting walk.
const (
	nestUnvisited = iota
	nestVisiting  // on the walk's path: meeting it again is a call to itself
	nestDone
)

// nesting measures the templates' depth of loops and template calls, each template once.
type nesting struct {
	trees map[string]*parse.Tree
	state map[string]int
	depth map[string]int // of the templates done
}

func (n *nesting) ofTemplate(name string) (int, error) {
	switch n.state[name] {
	case nestVisiting:
		return 0, fmt.Errorf("WEBHOOK_TEMPLATE: template %q calls itself", name)
	case nestDone:
		return n.depth[name], nil
	}
	tree := n.trees[name]
	if tree == nil {
		return 0, nil // an undefined template fails when it is called
	}
	n.state[name] = nestVisiting
	d, err := n.ofList(tree.Root)
	if err != nil {
		return 0, err
	}
	n.state[name], n.depth[name] = nestDone, d
	return d, nil
}

func (n *nesting) ofList(l *parse.ListNode) (int, error) {
	deepest := 0
	if l == nil {
		return 0, nil
	}
	for _, node := range l.Nodes {
		d, err := n.ofNode(node)
		if err != nil {
			return 0, err
		}
		deepest = max(deepest, d)
	}
	if deepest > maxNesting {
		return 0, fmt.Errorf("WEBHOOK_TEMPLATE: loops and template calls nested more than %d deep", maxNesting)
	}
	return deepest, nil
}

func (n *nesting) ofNode(node parse.Node) (int, error) {
	switch node := node.(type) {
	case *parse.RangeNode:
		d, err := maxOf(n.ofList, node.List, node.ElseList)
		return d + 1, err
	case *parse.IfNode:
		return maxOf(n.ofList, node.List, node.ElseList)
	case *parse.WithNode:
		return maxOf(n.ofList, node.List, node.ElseList)
	case *parse.ListNode:
		return n.ofList(node)
	case *parse.TemplateNode:
		d, err := n.ofTemplate(node.Name)
		return d + 1, err
	}
	return 0, nil
}

func maxOf(f func(*parse.ListNode) (int, error), lists ...*parse.ListNode) (int, error) {
	deepest := 0
	for _, l := range lists {
		d, err := f(l)
		if err != nil {
			return 0, err
		}
		deepest = max(deepest, d)
	}
	return deepest, nil
}

// boundedBuffer fails the write that would take it past max, which stops the template.
type boundedBuffer struct {
	b   bytes.Buffer
	max int
}

// room is what the buffer can still take.
func (w *boundedBuffer) room() int { return w.max - w.b.Len() }

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		return 0, errTooLarge
	}
	return w.b.Write(p)
}

func sampleNotification() Notification {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return Notification{
		EventID:              "spot-i-0123456789abcdef0",
		Kind:                 "spot-interruption",
		Monitor:              "imds",
		Description:          "sample notification",
		State:                "active",
		NodeName:             "ip-10-0-0-1.ec2.internal",
		InstanceID:           "i-0123456789abcdef0",
		ProviderID:           "aws:///us-east-1a/i-0123456789abcdef0",
		InstanceType:         "m5.large",
		AutoScalingGroupName: "sample-asg",
		AvailabilityZone:     "us-east-1a",
		Region:               "us-east-1",
		StartTime:            start,
		EndTime:              start.Add(2 * time.Minute),
		Pods:                 []string{"default/sample-0", "default/sample-1"},
		NodeLabels:           map[string]string{"kubernetes.io/os": "linux"},
	}
}

// The largest notification, for the second start-up render. Names are as long as Kubernetes
// and AWS let them be (a namespace, a generated pod name, a node name, a label's prefix, name
// and value, an Auto Scaling group); the counts are a large node's: the pods the largest EKS
// instance types run, more labels than a node carries, a description twice as long as a
// node's record keeps one.
const (
	worstPods        = 250
	worstLabels      = 64
	worstDescription = 1024
)

func worstCaseNotification() Notification {
	n := sampleNotification()
	n.EventID = filled("spot-i-0123456789abcdef0-", 63)
	n.Kind = "capacity-reservation-interruption"
	n.Monitor = "ec2-status"
	n.State = "cordoned"
	n.Description = filled(`Scheduled "instance-retirement" <event> & reboot\`+"\n", worstDescription)
	n.NodeName = filled("ip-10-0-0-1-", 253-len(".ec2.internal")) + ".ec2.internal"
	n.InstanceID = "i-0123456789abcdef0"
	n.AvailabilityZone = "us-east-1-wl1-bos-wlz-1"
	n.Region = "us-east-1"
	n.ProviderID = "aws:///" + n.AvailabilityZone + "/" + n.InstanceID
	n.InstanceType = filled("u7inh-32tb.480xlarge-", 63)
	n.AutoScalingGroupName = filled("eks-workers-", 255)
	n.Pods = make([]string, worstPods)
	for i := range n.Pods {
		n.Pods[i] = filled(fmt.Sprintf("namespace-%d-", i), 63) + "/" + filled(fmt.Sprintf("pod-%d-", i), 63)
	}
	n.NodeLabels = make(map[string]string, worstLabels)
	for i := range worstLabels {
		key := filled(fmt.Sprintf("label-%d.example.com", i), 63) + "/" + filled("name-", 63)
		n.NodeLabels[key] = filled("value-", 63)
	}
	return n
}

// filled is prefix repeated to length n.
func filled(prefix string, n int) string { return strings.Repeat(prefix, n/len(prefix)+1)[:n] }
