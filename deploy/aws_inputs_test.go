// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/internal/config"
)

// The controller's delays before a message it keeps comes back (internal/controller:
// launchCheck while a launch hook's node joins, retryLater for another cluster's instance).
const (
	launchRecheck  = 2 * time.Second
	foreignRecheck = 5 * time.Minute
)

// denyInsecureTransport is the statement every queue's policy needs for the queue's ARN.
func denyInsecureTransport(arn string) string {
	return `{"Action":["sqs:*"],"Condition":{"Bool":{"aws:SecureTransport":["false"]}},"Effect":"Deny","Principal":"*","Resource":["` + arn + `"],"Sid":"DenyInsecureTransport"}`
}

func hasStatement(stmts []map[string]any, want string) bool {
	for _, st := range stmts {
		if asJSON(st) == want {
			return true
		}
	}
	return false
}

// TestQueueDeadLettersKeyTransportAlarm: the queue has a dead-letter queue (its redrive
// policy's maxReceiveCount an input, by default above the deliveries of any message the
// controller keeps on purpose), both refuse requests without TLS, an optional KMS key
// encrypts both (and the role may decrypt with it), and an alarm on the oldest message's age
// (and one on the dead letters) notifies an optional SNS topic.
func TestQueueDeadLettersKeyTransportAlarm(t *testing.T) {
	defaults, err := config.LoadOnly(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	eachDialect(t, nil, func(t *testing.T, s *awsSetup) {
		if s.Queue == nil || s.DeadLetters == nil {
			t.Fatalf("queue %v, dead letters %v: want both", s.Queue, s.DeadLetters)
		}
		if s.Queue["dead_letters"] != "DLQ_ARN" {
			t.Errorf("the queue's redrive policy sends to %q, want the dead-letter queue", s.Queue["dead_letters"])
		}
		n, _ := strconv.Atoi(s.Queue["max_receive_count"])
		retention, _ := strconv.Atoi(s.Queue["retention"])
		launch := int(defaults.Config.ASGLaunchReadyTimeout / launchRecheck)
		foreign := int(time.Duration(retention) * time.Second / foreignRecheck)
		if n <= launch || n <= foreign || n > 1000 {
			t.Errorf("maxReceiveCount %d by default: want above a launch hook's deliveries while its node joins (%d) and another cluster's message's over the retention (%d), and at most SQS's 1000",
				n, launch, foreign)
		}
		// A message counts towards the age until its third delivery (SQS); another cluster's comes
		// back every foreignRecheck.
		if th, _ := strconv.Atoi(fmt.Sprint(s.Alarms["ApproximateAgeOfOldestMessage"]["threshold"])); time.Duration(th)*time.Second <= 2*foreignRecheck {
			t.Errorf("the age alarm goes off at %d s by default: a message about another cluster's instance reaches %v before its third delivery", th, 2*foreignRecheck)
		}
		if dr, _ := strconv.Atoi(s.DeadLetters["retention"]); dr <= retention {
			t.Errorf("the dead letters are kept %d s, the queue's messages %d s: a moved message keeps its age, so it needs longer", dr, retention)
		}
		for name, q := range map[string]map[string]string{"queue": s.Queue, "dead letters": s.DeadLetters} {
			if q["sse"] != "true" || q["kms_key"] != "" {
				t.Errorf("%s: %v, want SQS-managed encryption without a key", name, q)
			}
		}
		if !hasStatement(s.QueuePolicy, denyInsecureTransport("QUEUE_ARN")) || !hasStatement(s.DeadLetterPolicy, denyInsecureTransport("DLQ_ARN")) {
			t.Errorf("a queue takes requests without TLS:\nqueue %s\ndead letters %s\nwant each %s", asJSON(s.QueuePolicy), asJSON(s.DeadLetterPolicy), denyInsecureTransport("<its ARN>"))
		}
		age := s.Alarms["ApproximateAgeOfOldestMessage"]
		want := `{"comparison":"GreaterThanThreshold","dimensions":{"QueueName":"lifeboat-prod"},"evaluation_periods":"3","metric":"ApproximateAgeOfOldestMessage",` +
			`"name":"lifeboat-prod-oldest-message","namespace":"AWS/SQS","period":"60","statistic":"Maximum","threshold":"900","treat_missing_data":"notBreaching"}`
		if asJSON(age) != want {
			t.Errorf("the age alarm:\n%s\nwant\n%s", asJSON(age), want)
		}
		dead := s.Alarms["ApproximateNumberOfMessagesVisible"]
		want = `{"comparison":"GreaterThanThreshold","dimensions":{"QueueName":"lifeboat-prod-dead-letters"},"evaluation_periods":"1","metric":"ApproximateNumberOfMessagesVisible",` +
			`"name":"lifeboat-prod-dead-letters","namespace":"AWS/SQS","period":"60","statistic":"Maximum","threshold":"0","treat_missing_data":"notBreaching"}`
		if asJSON(dead) != want {
			t.Errorf("the dead letters' alarm:\n%s\nwant\n%s", asJSON(dead), want)
		}
	})
	eachDialect(t, map[string]any{"kms_key_arn": testKey, "alarm_topic_arn": testTopic, "max_receive_count": 5, "oldest_message_alarm_seconds": 120}, func(t *testing.T, s *awsSetup) {
		for name, q := range map[string]map[string]string{"queue": s.Queue, "dead letters": s.DeadLetters} {
			if q["kms_key"] != testKey || q["sse"] == "true" {
				t.Errorf("%s: %v, want the key and no SQS-managed encryption", name, q)
			}
		}
		if st := statement(s.Policy, "QueueKey"); asJSON(st) != `{"Action":["kms:Decrypt"],"Effect":"Allow","Resource":["`+testKey+`"],"Sid":"QueueKey"}` {
			t.Errorf("the role's statement for the key: %s", asJSON(st))
		}
		if s.Queue["max_receive_count"] != "5" || s.Alarms["ApproximateAgeOfOldestMessage"]["threshold"] != "120" {
			t.Errorf("maxReceiveCount %s, alarm threshold %v: want the inputs", s.Queue["max_receive_count"], s.Alarms["ApproximateAgeOfOldestMessage"]["threshold"])
		}
		for metric, a := range s.Alarms {
			if asJSON(a["alarm_actions"]) != `["`+testTopic+`"]` || asJSON(a["ok_actions"]) != `["`+testTopic+`"]` {
				t.Errorf("alarm on %s notifies %v (and back to OK %v), want the topic", metric, a["alarm_actions"], a["ok_actions"])
			}
		}
	})
	for _, bad := range []map[string]any{{"max_receive_count": 0}, {"max_receive_count": 1001}, {"kms_key_arn": "alias/lifeboat"},
		{"alarm_topic_arn": "oncall"}, {"oldest_message_alarm_seconds": 30}} {
		for input := range bad {
			refusedByBoth(t, bad, input, "")
		}
	}

	// The key's own policy is the operator's: the docs give the statement that lets EventBridge use it.
	if !docsGrant(t, "events.amazonaws.com", "kms:GenerateDataKey", "kms:Decrypt") {
		t.Errorf("docs/deploy.md gives no key policy statement letting events.amazonaws.com use the queue's key (kms:GenerateDataKey, kms:Decrypt)")
	}
}

// docsGrant reports whether a JSON policy or statement of docs/deploy.md allows the service
// principal the actions.
func docsGrant(t *testing.T, service string, actions ...string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		var doc map[string]any
		if json.Unmarshal([]byte(block[1]), &doc) != nil {
			continue
		}
		if _, one := doc["Effect"]; one { // a statement to add to a policy
			doc = map[string]any{"Version": "2012-10-17", "Statement": []any{doc}}
		}
		if _, policy := doc["Statement"]; !policy {
			continue
		}
		for _, st := range policyDoc(t, "docs/deploy.md", doc) {
			got := asJSON(st["Action"])
			ok := st["Effect"] == "Allow" && asJSON(lookupOr(st, "Principal.Service")) == `"`+service+`"`
			for _, a := range actions {
				ok = ok && strings.Contains(got, `"`+a+`"`)
			}
			if ok {
				return true
			}
		}
	}
	return false
}

// TestRoleNamePathBoundary: the role's name (by default unique per region), path and
// permissions boundary are inputs.
func TestRoleNamePathBoundary(t *testing.T) {
	eachDialect(t, nil, func(t *testing.T, s *awsSetup) {
		if want := `{"name":"lifeboat-prod-` + testRegion + `","path":"/"}`; asJSON(s.Role) != want {
			t.Errorf("role %s, want %s", asJSON(s.Role), want)
		}
	})
	eachDialect(t, map[string]any{"role_name": "lifeboat", "role_path": "/controllers/", "permissions_boundary_arn": testBoundary}, func(t *testing.T, s *awsSetup) {
		if want := `{"name":"lifeboat","path":"/controllers/","permissions_boundary":"` + testBoundary + `"}`; asJSON(s.Role) != want {
			t.Errorf("role %s, want %s", asJSON(s.Role), want)
		}
	})
	refusedByBoth(t, map[string]any{"role_path": "controllers"}, "role_path", "")
	refusedByBoth(t, map[string]any{"permissions_boundary_arn": "platform-boundary"}, "permissions_boundary_arn", "")
}

// TestGroupActionsTaggedAndOptIn: the role acts only on this cluster's tagged groups and
// instances, and an action only an opt-in feature calls is granted only with its input
// (checkPolicy, for each input alone).
func TestGroupActionsTaggedAndOptIn(t *testing.T) {
	inputs := map[string]bool{}
	for _, p := range deploy.AWSPermissions {
		if p.Grant != "" && p.Grant != "kms_key_arn" {
			inputs[p.Grant] = true
		}
	}
	if len(inputs) < 4 {
		t.Fatalf("only %v grant opt-in actions", keysOf(inputs))
	}
	for _, input := range append([]string{""}, keysOf(inputs)...) {
		in := map[string]any{}
		if input != "" {
			in[input] = true
		}
		eachDialect(t, in, func(t *testing.T, s *awsSetup) {
			checkPolicy(t, fmt.Sprintf("%v", in), s.Policy, withInputs(in), "QUEUE_ARN")
		})
	}
}

// TestOptionalRules: the launch lifecycle actions and the rebalance recommendations are sent
// by default, and each can be left out.
func TestOptionalRules(t *testing.T) {
	sends := func(s *awsSetup, sample string) bool {
		for _, r := range s.Rules {
			if matches(t, r.Pattern, readSample(t, sample)) {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		inputs            map[string]any
		launch, rebalance bool
	}{
		{nil, true, true},
		{map[string]any{"launch_lifecycle_actions": false}, false, true},
		{map[string]any{"rebalance_recommendations": false}, true, false},
	} {
		eachDialect(t, tc.inputs, func(t *testing.T, s *awsSetup) {
			if got := sends(s, "asg-launch.json"); got != tc.launch {
				t.Errorf("%v: launch lifecycle actions sent: %v, want %v", tc.inputs, got, tc.launch)
			}
			if got := sends(s, "rebalance.json"); got != tc.rebalance {
				t.Errorf("%v: rebalance recommendations sent: %v, want %v", tc.inputs, got, tc.rebalance)
			}
			if !sends(s, "asg-terminate.json") {
				t.Errorf("%v: terminate lifecycle actions not sent", tc.inputs)
			}
		})
	}
}

// TestExistingQueue: with an existing queue (NTH's), no queue is made, the rules send to it,
// the role reads it, its alarm watches it and the outputs name it.
func TestExistingQueue(t *testing.T) {
	eachDialect(t, map[string]any{"existing_queue_arn": testNTHQueue}, func(t *testing.T, s *awsSetup) {
		if s.Queue != nil || s.DeadLetters != nil || s.QueuePolicy != nil || s.DeadLetterPolicy != nil {
			t.Errorf("a queue or a queue policy is made: %v %v %v %v", s.Queue, s.DeadLetters, s.QueuePolicy, s.DeadLetterPolicy)
		}
		for tok, r := range s.Rules {
			if r.Target != testNTHQueue {
				t.Errorf("rule %s sends to %s", tok, r.Target)
			}
		}
		if st := statement(s.Policy, "Queue"); asJSON(st["Resource"]) != `["`+testNTHQueue+`"]` {
			t.Errorf("the role reads %v", st["Resource"])
		}
		if want := `{"queuearn":"` + testNTHQueue + `","queueurl":"https://sqs.` + testRegion + `.amazonaws.com/` + testAccount + `/nth-queue","rolearn":"ROLE_ARN"}`; asJSON(s.Outputs) != want {
			t.Errorf("outputs %s, want %s", asJSON(s.Outputs), want)
		}
		if len(s.Alarms) != 1 || asJSON(s.Alarms["ApproximateAgeOfOldestMessage"]["dimensions"]) != `{"QueueName":"nth-queue"}` {
			t.Errorf("alarms %s, want the age alarm on nth-queue only", asJSON(s.Alarms))
		}
	})
	refusedByBoth(t, map[string]any{"existing_queue_arn": "https://sqs." + testRegion + ".amazonaws.com/" + testAccount + "/nth-queue"}, "existing_queue_arn", "")
	refusedByBoth(t, map[string]any{"existing_queue_arn": testNTHQueue + ".fifo"}, "existing_queue_arn", "")
}

// TestIRSANeedsOIDCProvider: irsa without the cluster's OIDC issuer (or with its scheme) is
// refused before anything is made; with it, the trust names the issuer and the ServiceAccount.
func TestIRSANeedsOIDCProvider(t *testing.T) {
	refusedByBoth(t, map[string]any{"credential_mode": "irsa"}, "oidc_provider", "the cluster's OIDC issuer")
	refusedByBoth(t, map[string]any{"credential_mode": "irsa", "oidc_provider": "https://" + testIssuer}, "oidc_provider", "")
	eachDialect(t, map[string]any{"credential_mode": "irsa", "oidc_provider": testIssuer}, func(t *testing.T, s *awsSetup) {
		want := `[{"Action":["sts:AssumeRoleWithWebIdentity"],"Condition":{"StringEquals":{"` + testIssuer + `:aud":["sts.amazonaws.com"],"` + testIssuer +
			`:sub":["system:serviceaccount:kube-system:lifeboat-controller"]}},"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::` + testAccount + `:oidc-provider/` + testIssuer + `"}}]`
		if asJSON(s.Trust) != want {
			t.Errorf("trust %s\nwant  %s", asJSON(s.Trust), want)
		}
		if s.Association != nil {
			t.Errorf("a Pod Identity association with irsa: %v", s.Association)
		}
	})
}

// TestPodIdentityTrustSessionTags: the Pod Identity trust admits only the controller's
// ServiceAccount of this cluster, through the session tags EKS Pod Identity sets.
func TestPodIdentityTrustSessionTags(t *testing.T) {
	for _, in := range []map[string]any{nil, {"namespace": "lifeboat", "service_account_name": "aws-node-termination-handler"}} {
		ns, sa := "kube-system", "lifeboat-controller"
		if in != nil {
			ns, sa = "lifeboat", "aws-node-termination-handler"
		}
		eachDialect(t, in, func(t *testing.T, s *awsSetup) {
			want := `[{"Action":["sts:AssumeRole","sts:TagSession"],"Condition":{"StringEquals":{"aws:RequestTag/eks-cluster-name":["prod"],` +
				`"aws:RequestTag/kubernetes-namespace":["` + ns + `"],"aws:RequestTag/kubernetes-service-account":["` + sa + `"]}},` +
				`"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"}}]`
			if asJSON(s.Trust) != want {
				t.Errorf("%v: trust %s\nwant  %s", in, asJSON(s.Trust), want)
			}
			if want := `{"cluster":"prod","namespace":"` + ns + `","role":"ROLE_ARN","service_account":"` + sa + `"}`; asJSON(s.Association) != want {
				t.Errorf("%v: association %s, want %s", in, asJSON(s.Association), want)
			}
		})
	}
}
