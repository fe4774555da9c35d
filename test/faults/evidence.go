// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"lifeboat.dev/lifeboat/test/sandbox"
)

// EvictionsByPod counts accepted evictions per pod ("namespace/name") among audit events. An
// eviction of a pod already terminating is accepted too, so it counts as a repeat. Refused
// ones (429 from a budget, 404/409 for a pod gone or replaced) and requests cut off by a kill
// (the API server records 504 when its client goes away mid-request) left the pod as it was.
func EvictionsByPod(events []sandbox.AuditEvent) map[string]int {
	out := map[string]int{}
	for _, e := range events {
		if e.Verb == "create" && e.ObjectRef != nil && e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "eviction" &&
			(e.ResponseStatus == nil || e.ResponseStatus.Code < 300) {
			out[e.ObjectRef.Namespace+"/"+e.ObjectRef.Name]++
		}
	}
	return out
}

// EvictionsCarriedOut counts, per pod ("namespace/name"), the evictions by user that took
// effect, from every client's audit events. An accepted eviction took effect. A 504 may have
// too: the server records it when its client went away mid-request, and it may have carried
// the eviction out all the same. A pod with no accepted eviction, a 504 one and a deletion
// (kwok deletes a pod its eviction marked; the log may hold the deletion before the 504)
// counts one; a pod with an accepted one counts those alone, since the accepted one may be
// what marked it.
func EvictionsCarriedOut(events []sandbox.AuditEvent, user string) map[string]int {
	accepted := map[string]int{}
	cut := map[string]bool{}     // a 504 eviction by user was seen
	deleted := map[string]bool{} // a deletion by anyone was seen
	for _, e := range events {
		r := e.ObjectRef
		if r == nil || r.Resource != "pods" {
			continue
		}
		pod := r.Namespace + "/" + r.Name
		code := 0
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		switch {
		case e.Verb == "create" && r.Subresource == "eviction" && e.User.Username == user && code < 300:
			accepted[pod]++
		case e.Verb == "create" && r.Subresource == "eviction" && e.User.Username == user && code == 504:
			cut[pod] = true
		case e.Verb == "delete" && r.Subresource == "":
			deleted[pod] = true
		}
	}
	for pod := range cut {
		if deleted[pod] && accepted[pod] == 0 {
			accepted[pod] = 1
		}
	}
	return accepted
}

// RequestsByKind counts audit events by "verb resource[/subresource]", e.g. "get nodes" or
// "create pods/eviction"; requests without an object (discovery) count under their verb.
func RequestsByKind(events []sandbox.AuditEvent) map[string]int {
	out := map[string]int{}
	for _, e := range events {
		key := e.Verb
		if r := e.ObjectRef; r != nil && r.Resource != "" {
			key += " " + r.Resource
			if r.Subresource != "" {
				key += "/" + r.Subresource
			}
		}
		out[key]++
	}
	return out
}

// FormatCounts prints counts as "key=n" pairs, largest first, for reports.
func FormatCounts(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

// ReceiptHandles returns the receipt handles named by an SQS DeleteMessage or
// DeleteMessageBatch request body (JSON protocol).
func ReceiptHandles(body string) ([]string, error) {
	var req struct {
		ReceiptHandle string
		Entries       []struct{ ReceiptHandle string }
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		return nil, fmt.Errorf("SQS request body %q: %w", clip(body), err)
	}
	var out []string
	if req.ReceiptHandle != "" {
		out = append(out, req.ReceiptHandle)
	}
	for _, e := range req.Entries {
		if e.ReceiptHandle != "" {
			out = append(out, e.ReceiptHandle)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("SQS request body %q names no receipt handle", clip(body))
	}
	return out, nil
}

// MessageIDOfReceipt is the message id a goaws receipt handle belongs to: goaws writes its
// handles as "<message id>#<random>".
func MessageIDOfReceipt(handle string) (string, error) {
	id, _, ok := strings.Cut(handle, "#")
	if !ok || id == "" {
		return "", fmt.Errorf("receipt handle %q is not <message id>#<suffix>", clip(handle))
	}
	return id, nil
}

// Metric sums the samples of a metric in Prometheus text exposition whose labels include
// every name/value pair given; found is false when no sample matches.
func Metric(exposition, name string, labelPairs ...string) (sum float64, found bool, err error) {
	if len(labelPairs)%2 != 0 {
		return 0, false, fmt.Errorf("metric %s: label pairs %q are not name/value pairs", name, labelPairs)
	}
	sc := bufio.NewScanner(strings.NewReader(exposition))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := cutLast(line, " ")
		if !ok {
			return 0, false, fmt.Errorf("metrics line %q: no value", clip(line))
		}
		metric, labels, _ := strings.Cut(series, "{")
		if metric != name {
			continue
		}
		if !hasLabels(strings.TrimSuffix(labels, "}"), labelPairs) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, false, fmt.Errorf("metrics line %q: value: %w", clip(line), err)
		}
		sum, found = sum+v, true
	}
	return sum, found, sc.Err()
}

// hasLabels reports whether a label list (`a="x",b="y"`) holds every pair. Label values in
// Lifeboat's metrics hold no commas or escaped quotes, so a plain split is enough.
func hasLabels(list string, pairs []string) bool {
	have := map[string]string{}
	for _, kv := range strings.Split(list, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			have[k] = strings.Trim(v, `"`)
		}
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if v, ok := have[pairs[i]]; !ok || v != pairs[i+1] {
			return false
		}
	}
	return true
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
