// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Rule is an EventBridge rule on the default bus: its event pattern, its state and the ARNs
// of its targets.
type Rule struct {
	Name         string
	EventPattern string // JSON
	State        string // "ENABLED" (the default) or "DISABLED"
	Targets      []string
}

// PutRule adds or replaces a rule.
func (s *Server) PutRule(r Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.State == "" {
		r.State = "ENABLED"
	}
	if s.rules == nil {
		s.rules = map[string]Rule{}
	}
	s.rules[r.Name] = r
}

// DeleteRule removes a rule, as an operator who deletes it does.
func (s *Server) DeleteRule(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rules, name)
}

// SetQueuePolicy makes GetQueueAttributes of the queue at queueURL answer this ARN and
// policy itself (the SQS backend keeps no policy).
func (s *Server) SetQueuePolicy(queueURL, arn, policy string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queueAttrs == nil {
		s.queueAttrs = map[string][2]string{}
	}
	s.queueAttrs[queueURL] = [2]string{arn, policy}
}

// eventsOperation is the EventBridge operation a JSON-protocol request names.
func eventsOperation(r *http.Request) (string, bool) {
	return strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AWSEvents.")
}

// serveEvents answers ListRuleNamesByTarget and DescribeRule.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, op string) {
	body, _ := io.ReadAll(r.Body)
	at := time.Now()
	idx, reqID := s.record(Call{Service: "events", Action: op, At: at, Body: string(body)})
	fail := func(status int, code, msg string) {
		s.setErrorCode(idx, code)
		w.Header().Set("X-Amzn-RequestId", reqID)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
	}
	if f, ok := s.activeFault("events", op, at); ok {
		fail(f.Status, f.Code, "fakeaws: injected fault")
		return
	}
	var in struct{ TargetArn, Name string }
	if err := json.Unmarshal(body, &in); err != nil {
		fail(http.StatusBadRequest, "ValidationException", err.Error())
		return
	}
	s.mu.Lock()
	var out any
	switch op {
	case "ListRuleNamesByTarget":
		names := []string{}
		for name, rule := range s.rules {
			if slices.Contains(rule.Targets, in.TargetArn) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		out = map[string]any{"RuleNames": names}
	case "DescribeRule":
		rule, ok := s.rules[in.Name]
		if !ok {
			s.mu.Unlock()
			fail(http.StatusBadRequest, "ResourceNotFoundException", "Rule "+in.Name+" does not exist.")
			return
		}
		out = map[string]any{"Name": rule.Name, "EventPattern": rule.EventPattern, "State": rule.State, "EventBusName": "default"}
	default:
		s.mu.Unlock()
		fail(http.StatusBadRequest, "UnknownOperationException", "fakeaws: EventBridge "+op+" is not served")
		return
	}
	s.mu.Unlock()
	w.Header().Set("X-Amzn-RequestId", reqID)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	json.NewEncoder(w).Encode(out)
}

// queueAttributes answers a GetQueueAttributes that asks only for QueueArn and Policy, for
// a queue given a policy (SetQueuePolicy); false leaves the request to the SQS backend.
func (s *Server) queueAttributes(w http.ResponseWriter, body []byte) bool {
	var in struct {
		QueueUrl       string
		AttributeNames []string
	}
	if json.Unmarshal(body, &in) != nil || len(in.AttributeNames) == 0 ||
		slices.ContainsFunc(in.AttributeNames, func(a string) bool { return a != "QueueArn" && a != "Policy" }) {
		return false
	}
	s.mu.Lock()
	attrs, ok := s.queueAttrs[in.QueueUrl]
	s.mu.Unlock()
	if !ok {
		return false
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	out := map[string]string{"QueueArn": attrs[0]}
	if attrs[1] != "" {
		out["Policy"] = attrs[1]
	}
	json.NewEncoder(w).Encode(map[string]any{"Attributes": out})
	return true
}

// EventKind is a kind of EventBridge event a rule selects (messages.EventKind's fields).
type EventKind struct {
	Name        string
	Source      string
	DetailTypes []string
}

// ShipSetup installs the set-up deploy/aws ships for the queue: a policy that lets
// EventBridge send to it, and an enabled rule per kind targeting it. It returns the rules'
// names by kind name.
func (s *Server) ShipSetup(queueURL, queueARN string, kinds []EventKind) map[string]string {
	s.SetQueuePolicy(queueURL, queueARN, `{"Version":"2012-10-17","Statement":[{"Effect":"Allow",`+
		`"Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"`+queueARN+`"}]}`)
	names := map[string]string{}
	for _, k := range kinds {
		name := "lifeboat-" + strings.ToLower(strings.ReplaceAll(k.Name, " ", "-"))
		pattern, _ := json.Marshal(map[string][]string{"source": {k.Source}, "detail-type": k.DetailTypes})
		s.PutRule(Rule{Name: name, Targets: []string{queueARN}, EventPattern: string(pattern)})
		names[k.Name] = name
	}
	return names
}
