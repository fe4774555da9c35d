package deploy_test

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestNodeRestrictionRenderedByVersion renders the chart offline, as CI and GitOps pipelines
// do: the node restriction follows the target version given with --kube-version (or the API
// list given with --api-versions), not only a live cluster's API list. A render for a version
// without ValidatingAdmissionPolicy says so in its output, and fails when the restriction is
// required.
func TestNodeRestrictionRenderedByVersion(t *testing.T) {
	h := newHelm(t)
	for _, tc := range []struct {
		name   string
		args   []string
		policy bool
		says   string // in the rendered output
	}{
		{"1.36", []string{"--kube-version", "1.36.3"}, true, ""},
		{"1.30", []string{"--kube-version", "1.30.0"}, true, ""},
		{"EKS version string", []string{"--kube-version", "v1.30.4-eks-a737599"}, true, ""},
		{"1.29", []string{"--kube-version", "1.29.9"}, false,
			"is left out: Kubernetes\n# v1.29.9 does not serve ValidatingAdmissionPolicy"},
		{"1.29 serving the API", []string{"--kube-version", "1.29.9", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"}, true, ""},
		{"1.36, turned off", []string{"--kube-version", "1.36.3", "--set", "agent.nodeRestriction.enabled=false"}, false, ""},
		{"1.36, controller only", []string{"--kube-version", "1.36.3", "--set", "agent.enabled=false", "--set", "controller.enabled=true"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.run(append([]string{"template", "lifeboat", chartDir, "--namespace", "kube-system"}, tc.args...)...)
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
			if tc.says != "" && !strings.Contains(out, tc.says) {
				t.Errorf("the render does not say %q:\n%s", tc.says, out)
			}
		})
	}

	out, err := h.run("template", "lifeboat", chartDir, "--kube-version", "1.29.9", "--set", "agent.nodeRestriction.required=true")
	if err == nil {
		t.Errorf("a required restriction rendered for 1.29 without error:\n%.300s", out)
	} else if !strings.Contains(err.Error(), "agent.nodeRestriction.required is true, but Kubernetes v1.29.9 does not serve ValidatingAdmissionPolicy") {
		t.Errorf("the error does not name the setting and the version:\n%v", err)
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
