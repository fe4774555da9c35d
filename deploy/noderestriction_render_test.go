// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestNodeRestrictionInEveryRender renders the chart offline, as CI and GitOps pipelines do:
// the node restriction is part of every render unless agent.nodeRestriction.enabled is false,
// plain `helm template` (Helm's default capabilities, which say nothing of the target cluster)
// and an old --kube-version included. Only an API list that is a live cluster's (it names
// resources such as v1/Node, as helm install's does) can say the cluster lacks
// ValidatingAdmissionPolicy; the render then fails, naming the setting that installs without it.
func TestNodeRestrictionInEveryRender(t *testing.T) {
	h := newHelm(t)
	const (
		node   = "v1/Node" // in a live cluster's API list, never in Helm's default one
		vap    = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"
		off    = "agent.nodeRestriction.enabled=false"
		lacks  = "Kubernetes v1.29.9 does not serve ValidatingAdmissionPolicy"
		retire = "agent.nodeRestriction.required=false no longer leaves it out"
	)
	for _, tc := range []struct {
		name   string
		args   []string
		policy bool
		fails  []string // in the error; the render fails when set
	}{
		{"plain helm template", nil, true, nil},
		{"1.36", []string{"--kube-version", "1.36.3"}, true, nil},
		{"EKS version string", []string{"--kube-version", "v1.30.4-eks-a737599"}, true, nil},
		{"an old version, offline", []string{"--kube-version", "1.29.9"}, true, nil},
		{"turned off", []string{"--set", off}, false, nil},
		{"controller only", []string{"--set", "agent.enabled=false", "--set", "controller.enabled=true"}, false, nil},
		{"required, deprecated", []string{"--set", "agent.nodeRestriction.required=true"}, true, nil},
		{"not required, deprecated", []string{"--set", "agent.nodeRestriction.required=false"}, true, nil},
		{"a live cluster serving the API", []string{"--kube-version", "1.29.9", "--api-versions", node, "--api-versions", vap}, true, nil},
		{"a live cluster without the API", []string{"--kube-version", "1.29.9", "--api-versions", node}, false,
			[]string{lacks, "set " + off + " to install without it"}},
		{"a live cluster without the API, not required", []string{"--kube-version", "1.29.9", "--api-versions", node, "--set", "agent.nodeRestriction.required=false"}, false,
			[]string{lacks, retire, "set " + off}},
		{"a live cluster without the API, turned off", []string{"--kube-version", "1.29.9", "--api-versions", node, "--set", off}, false, nil},
		{"a live cluster without the API, controller only", []string{"--kube-version", "1.29.9", "--api-versions", node,
			"--set", "agent.enabled=false", "--set", "controller.enabled=true"}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.run(append([]string{"template", "lifeboat", chartDir, "--namespace", "kube-system"}, tc.args...)...)
			if tc.fails != nil {
				if err == nil {
					t.Fatalf("rendered without error:\n%.300s", out)
				}
				for _, want := range tc.fails {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the error does not say %q:\n%v", want, err)
					}
				}
				if strings.Contains(tc.name, "not required") != strings.Contains(err.Error(), retire) {
					t.Errorf("the error says %q exactly when agent.nodeRestriction.required=false is given:\n%v", retire, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeAll(out)
			if err != nil {
				t.Fatal(err)
			}
			kinds := rendered(objs).kinds()
			if got := kinds["ValidatingAdmissionPolicy"] == 1 && kinds["ValidatingAdmissionPolicyBinding"] == 1; got != tc.policy {
				t.Errorf("policy and binding rendered: %v, want %v (kinds %v)", got, tc.policy, kinds)
			}
			if !tc.policy && (kinds["ValidatingAdmissionPolicy"] != 0 || kinds["ValidatingAdmissionPolicyBinding"] != 0) {
				t.Errorf("a policy or binding is rendered: kinds %v", kinds)
			}
		})
	}
}

// TestNodeRestrictionFollowsSettings checks the taint keys and labels the policy lets the
// agent change besides its lifeboat.dev/ ones: the out-of-service taint and the load-balancer
// label only where the agent may write them, including when the chart cannot see the setting
// (a Secret, extraEnv), since refusing them would fail the agent's cordon.
func TestNodeRestrictionFollowsSettings(t *testing.T) {
	h := newHelm(t)
	const (
		oos     = "node.kubernetes.io/out-of-service"
		exclude = "node.kubernetes.io/exclude-from-external-load-balancers"
		spot    = "aws-node-termination-handler/spot-itn"
	)
	for _, tc := range []struct {
		name         string
		args         []string
		taint, label bool
	}{
		{"defaults", nil, false, false},
		{"out-of-service taint", []string{"--set", "config.enableOutOfServiceTaint=true"}, true, false},
		{"load-balancer label", []string{"--set", "config.excludeFromLoadBalancers=true"}, false, true},
		{"both, for the agent only", []string{"--set", "agent.config.enableOutOfServiceTaint=True", "--set", "agent.config.excludeFromLoadBalancers=1"}, true, true},
		{"on for the controller only", []string{"--set", "controller.enabled=true", "--set", "config.queueUrl=q",
			"--set", "controller.config.enableOutOfServiceTaint=true", "--set", "controller.config.excludeFromLoadBalancers=true"}, false, false},
		{"off for the agent", []string{"--set", "config.enableOutOfServiceTaint=true", "--set", "agent.config.enableOutOfServiceTaint=false"}, false, false},
		{"from a Secret", []string{"--set", "configFromSecret.excludeFromLoadBalancers.name=s", "--set", "configFromSecret.excludeFromLoadBalancers.key=k"}, false, true},
		{"in extraEnv", []string{"--set", "agent.extraEnv[0].name=ENABLE_OUT_OF_SERVICE_TAINT", "--set-string", "agent.extraEnv[0].value=true"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.template(t, append([]string{"--kube-version", "1.36.3"}, tc.args...)...)
			p := only[*admissionregistrationv1.ValidatingAdmissionPolicy](t, r)
			vars := map[string]string{}
			for _, v := range p.Spec.Variables {
				vars[v.Name] = v.Expression
			}
			if !strings.Contains(vars["taintKeys"], `"`+spot+`"`) {
				t.Errorf("taintKeys %s lacks %s", vars["taintKeys"], spot)
			}
			if got := strings.Contains(vars["taintKeys"], `"`+oos+`"`); got != tc.taint {
				t.Errorf("taintKeys %s: holds %s %v, want %v", vars["taintKeys"], oos, got, tc.taint)
			}
			if got := strings.Contains(vars["labelKeys"], `"`+exclude+`"`); got != tc.label {
				t.Errorf("labelKeys %s: holds %s %v, want %v", vars["labelKeys"], exclude, got, tc.label)
			}
		})
	}
}
