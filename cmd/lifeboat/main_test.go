// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func runWith(t *testing.T, args []string, env map[string]string) (int, string, string) {
	t.Helper()
	var out, errOut strings.Builder
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code := run(context.Background(), args, lookup, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestConfigCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		wantOut  []string // substrings of stdout
		wantErr  []string // substrings of stderr
	}{
		{"agent defaults", []string{"config"}, map[string]string{"NODE_NAME": "n1"}, 0,
			[]string{"# mode: agent", "NODE_NAME", "n1", "env NODE_NAME", "WORKERS", "default"}, nil},
		{"NTH selection of controller mode", []string{"config", "--workers=4"},
			map[string]string{"ENABLE_SQS_TERMINATION_DRAINING": "true", "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/q"}, 0,
			[]string{"# mode: controller", "# warning: CLUSTER_NAME is unset", "flag --workers", "AWS_REGION", "us-east-1"}, nil},
		{"secret redacted", []string{"config"}, map[string]string{"NODE_NAME": "n", "WEBHOOK_URL": "https://hooks.example.com/T/secret"}, 0,
			[]string{"<redacted>"}, nil},
		{"bad values exit 2, each named", []string{"config"}, map[string]string{"NODE_NAME": "n", "WORKERS": "abc", "TAINT_EFFECT": "Maybe"}, 2,
			nil, []string{`WORKERS="abc": not an integer`, `TAINT_EFFECT="Maybe": not one of NoSchedule, PreferNoSchedule, NoExecute`}},
		{"bad flag exits 2", []string{"config", "--metadata-tries=zero"}, map[string]string{"NODE_NAME": "n"}, 2,
			nil, []string{`--metadata-tries="zero": not an integer`}},
		{"missing NODE_NAME exits 2", []string{"config"}, nil, 2, nil, []string{"NODE_NAME is required in agent mode"}},
		{"unknown command exits 2", []string{"drain"}, nil, 2, nil, []string{`unknown command "drain"`}},
		{"version", []string{"version"}, nil, 0, []string{"lifeboat dev"}, nil},
		{"help lists the commands", []string{"--help"}, nil, 0, []string{"Usage:", "lifeboat [command]", "status", "check", "agent", "--context"}, nil},
		{"a daemon command's help lists the settings", []string{"agent", "--help"}, nil, 0,
			[]string{"Usage: lifeboat agent", "--enable-sqs-termination-draining, ENABLE_SQS_TERMINATION_DRAINING"}, nil},
		{"each read-only command has its own help", []string{"status", "--help"}, nil, 0, []string{"lifeboat status [NODE...]", "--watch", "jsonpath"}, nil},
		{"agent without Kubernetes fails clearly", []string{"agent"}, map[string]string{"NODE_NAME": "n", "ENABLE_PROBES_SERVER": "false"}, 2,
			nil, []string{"no Kubernetes API configured"}},
		{"a command's usage hint names it once", []string{"status", "--bogus"}, nil, 2, nil, []string{"Run 'lifeboat status --help' for usage."}},
		{"a nested command's usage hint", []string{"completion", "bash", "--bogus"}, nil, 2, nil, []string{"Run 'lifeboat completion bash --help' for usage."}},
		{"a person's bare lifeboat prints the commands and a hint", nil, nil, 0, []string{"Usage:", "lifeboat [command]", "status", "agent", bareHint}, nil},
		{"bare lifeboat with global flags too", []string{"--context", "prod", "-n=x", "-A", "-o", "json", "--kubeconfig=/k", "--log-level", "debug"}, nil, 0,
			[]string{"Usage:", bareHint}, nil},
		{"a shell's KUBECONFIG and AWS_REGION are no daemon settings", []string{"--context=prod"},
			map[string]string{"KUBECONFIG": "/k", "AWS_REGION": "us-east-1", "LOG_LEVEL": "debug", "NODE_NAME": "", "HOME": "/h"}, 0, []string{bareHint}, nil},
		{"in a pod bare lifeboat is the daemon", nil, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, 2,
			nil, []string{"NODE_NAME is required in agent mode"}},
		{"in a pod a global flag is the daemon's to refuse", []string{"--context", "prod"}, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, 2,
			nil, []string{"flag provided but not defined: -context"}},
		{"a daemon setting in the environment starts the daemon", nil, map[string]string{"NODE_NAME": "n", "ENABLE_PROBES_SERVER": "false"}, 2,
			nil, []string{"no Kubernetes API configured"}},
		{"NTH's mode variable starts the controller", nil, map[string]string{"ENABLE_SQS_TERMINATION_DRAINING": "true"}, 2,
			nil, []string{"QUEUE_URL"}},
		{"a deprecated NTH alias is a setting too", nil, map[string]string{"GRACE_PERIOD": "30"}, 2, nil, []string{"NODE_NAME is required"}},
		{"a daemon flag on the line starts the daemon", []string{"--node-name=n", "--enable-probes-server=false"}, nil, 2,
			nil, []string{"no Kubernetes API configured"}},
		{"an unknown flag is the daemon's to refuse", []string{"--bogus"}, nil, 2, nil, []string{"flag provided but not defined: -bogus"}},
		{"preflight: unknown mode exits 2", []string{"preflight", "drain"}, map[string]string{"NODE_NAME": "n"}, 2,
			nil, []string{`preflight: unknown mode "drain" (agent or controller)`}},
		{"preflight: invalid configuration exits 2", []string{"preflight", "agent"}, nil, 2, nil, []string{"NODE_NAME is required in agent mode"}},
		{"preflight without Kubernetes or metadata fails with fixes", []string{"preflight", "agent"},
			map[string]string{"NODE_NAME": "n", "INSTANCE_METADATA_URL": "http://127.0.0.1:1", "METADATA_TRIES": "1"}, 1,
			[]string{"lifeboat preflight, agent mode", "FAIL    kubernetes api", "fix: set KUBECONFIG", "FAIL    instance metadata",
				"fix: INSTANCE_METADATA_URL=http://127.0.0.1:1 must answer", "preflight FAILED: 0 ok, 0 warning(s), 2 failed"}, nil},
		{"preflight picks controller mode as NTH does", []string{"preflight", "--aws-endpoint=http://127.0.0.1:1"},
			map[string]string{"ENABLE_SQS_TERMINATION_DRAINING": "true", "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/q"}, 1,
			[]string{"lifeboat preflight, controller mode", "FAIL    sqs queue", "WARN    identity: CLUSTER_NAME"}, nil},
	}
	// The AWS SDK reads credentials from the process environment, which TestMain
	// (sandboxtest.Main) gives static keys and no instance metadata.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runWith(t, tt.args, tt.env)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out, errOut)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if strings.Contains(out+errOut, "secret") && !strings.Contains(tt.name, "bad") {
				t.Errorf("output leaks a secret:\n%s%s", out, errOut)
			}
		})
	}
}

// A port already taken ends the start at once, naming the setting to change, instead of
// leaving a process whose probes can never answer.
func TestTakenPortStopsTheStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    string
		setting string
	}{
		{"probes on by default", map[string]string{"PROBES_SERVER_BIND_ADDRESS": "127.0.0.1", "PROBES_SERVER_PORT": port},
			"cannot serve probes on 127.0.0.1:" + port, "PROBES_SERVER_PORT"},
		{"metrics", map[string]string{"ENABLE_PROBES_SERVER": "false", "ENABLE_PROMETHEUS_SERVER": "true",
			"PROMETHEUS_SERVER_BIND_ADDRESS": "127.0.0.1", "PROMETHEUS_SERVER_PORT": port},
			"cannot serve metrics on 127.0.0.1:" + port, "PROMETHEUS_SERVER_PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["NODE_NAME"] = "n"
			code, _, errOut := runWith(t, []string{"agent"}, tc.env)
			if code != 2 {
				t.Errorf("exit %d, want 2\n%s", code, errOut)
			}
			for _, w := range []string{tc.want, "address already in use", "set " + tc.setting + " to a free port"} {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

// An output format a command does not offer is a usage error, naming the formats it does.
func TestUnknownOutputFormat(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"status", "-o", "xml"}, func(string) (string, bool) { return "", false }, io.Discard, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), `unknown output format "xml"`) || !strings.Contains(stderr.String(), "jsonpath") {
		t.Errorf("status -o xml: exit %d, %q", code, stderr.String())
	}
}

// status --load-balancers without a region stops before reading anything, naming the setting.
func TestStatusLoadBalancersNeedsARegion(t *testing.T) {
	var stderr bytes.Buffer
	env := func(k string) (string, bool) {
		if k == "KUBECONFIG" {
			return "/nonexistent/kubeconfig", true
		}
		return "", false
	}
	if code := run(context.Background(), []string{"status", "--load-balancers"}, env, io.Discard, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "--load-balancers needs AWS_REGION") {
		t.Errorf("status --load-balancers without a region: exit %d, %q", code, stderr.String())
	}
}

// The krew manifest template names the plugin's binary for every platform, and every
// placeholder is one the release fills.
func TestKrewManifestTemplate(t *testing.T) {
	b, err := os.ReadFile("../../deploy/krew/lifeboat.yaml.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	filled := map[string]bool{"VERSION": true}
	for _, p := range []string{"LINUX_AMD64", "LINUX_ARM64", "DARWIN_AMD64", "DARWIN_ARM64"} {
		filled["URI_"+p], filled["SHA256_"+p] = true, true
	}
	text := os.Expand(string(b), func(name string) string {
		if !filled[name] {
			t.Errorf("placeholder ${%s} is not one the release fills", name)
		}
		return "x-" + strings.ToLower(name)
	})
	var m struct {
		Kind string `json:"kind"`
		Spec struct {
			Caveats   string `json:"caveats"`
			Platforms []struct {
				URI string `json:"uri"`
				Bin string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	if m.Kind != "Plugin" || len(m.Spec.Platforms) != 4 {
		t.Fatalf("%+v", m)
	}
	for _, p := range m.Spec.Platforms {
		if p.Bin != "kubectl-lifeboat" || !strings.HasPrefix(p.URI, "x-uri_") {
			t.Errorf("platform %+v", p)
		}
	}
	// krew links only bin into PATH: the completion helper is the user's to copy.
	if !strings.Contains(m.Spec.Caveats, "kubectl_complete-lifeboat") {
		t.Errorf("the caveats do not say how to install the completion helper:\n%s", m.Spec.Caveats)
	}
}

// Every plugin archive the release builds holds the completion helper next to the plugin:
// make release-artifacts gives it to the release tool, whose verify refuses an archive
// without it (hack/release).
func TestReleaseArchivesShipTheCompletionHelper(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^\s*\$\(RELEASE_TOOL\) plugin (.*)$`).FindSubmatch(b)
	if line == nil || !strings.Contains(string(line[1]), "-completion deploy/krew/kubectl_complete-lifeboat") {
		t.Errorf("make's plugin archives lack kubectl_complete-lifeboat (release plugin line %q)", line)
	}
	if fi, err := os.Stat("../../deploy/krew/kubectl_complete-lifeboat"); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("deploy/krew/kubectl_complete-lifeboat is not an executable file: %v", err)
	}
}

// Under the plugin's name the usage hint names the command as kubectl does.
func TestPluginUsageHint(t *testing.T) {
	var stderr bytes.Buffer
	code := runAs(context.Background(), "kubectl-lifeboat", []string{"status", "--bogus"}, func(string) (string, bool) { return "", false }, io.Discard, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "Run 'kubectl lifeboat status --help' for usage.") {
		t.Errorf("exit %d, %q", code, stderr.String())
	}
}

// Invoked as kubectl_complete-lifeboat, the binary completes the plugin's arguments as kubectl
// passes them (the words after "kubectl lifeboat", the one being typed last), silently.
func TestCompletionHelper(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c1, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u1, user: {}}]
contexts: [{name: prod, context: {cluster: c1, user: u1}}, {name: dev, context: {cluster: c1, user: u1}}]
current-context: prod
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) { return kubeconfig, k == "KUBECONFIG" }
	for _, tc := range []struct {
		args    []string
		want    []string // the lines, directive last
		without []string
	}{
		{[]string{""}, []string{"status\t", "check\t", "version\t", ":4"}, []string{"agent", "controller", "completion"}},
		{[]string{"status", "-o", ""}, []string{"table", "wide", "name", "json", "yaml", "jsonpath=", ":4"}, nil},
		{[]string{"check", "--output", ""}, []string{"table", "name", "jsonpath=", ":4"}, []string{"wide"}},
		{[]string{"version", "-o", ""}, []string{"json", "yaml", ":4"}, []string{"wide", "name"}},
		{[]string{"status", "-o", "jsonp"}, []string{"jsonpath=", ":6"}, []string{"json\n"}}, // no space after the "="
		{[]string{"status", "--context", ""}, []string{"dev", "prod", ":4"}, nil},
		{[]string{"--context", "d"}, []string{"dev", ":4"}, []string{"prod"}},
		{[]string{"check", "--cluster", ""}, []string{"c1", ":4"}, nil},
		{[]string{"status", "-n", ""}, []string{":4"}, nil}, // the cluster does not answer: nothing, no error
		{[]string{"__complete", "status", "-o", "y"}, []string{"yaml", ":4"}, nil},
	} {
		var out, errOut bytes.Buffer
		code := runAs(context.Background(), "kubectl_complete-lifeboat", tc.args, env, &out, &errOut)
		lines := "\n" + out.String()
		for _, w := range tc.want {
			if !strings.Contains(lines, "\n"+w) {
				t.Errorf("%q: lacks %q:\n%s", tc.args, w, out.String())
			}
		}
		for _, w := range tc.without {
			if strings.Contains(lines, "\n"+w) {
				t.Errorf("%q: offers %q:\n%s", tc.args, w, out.String())
			}
		}
		if code != exitOK || errOut.Len() > 0 {
			t.Errorf("%q: exit %d, stderr %q", tc.args, code, errOut.String())
		}
	}
}
