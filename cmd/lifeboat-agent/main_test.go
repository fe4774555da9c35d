// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/version"
)

// The agent's own binary takes the agent's settings as `lifeboat agent` does: --help lists
// them, a bad one is refused with exit 2 naming it, before anything starts; version prints
// the release's build.
func TestCommandLine(t *testing.T) {
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name         string
		args         []string
		env          map[string]string
		code         int
		stdout, errs string
	}{
		{"help", []string{"--help"}, nil, daemon.ExitOK, "Usage: lifeboat-agent", ""},
		{"help after agent", []string{"agent", "--help"}, nil, daemon.ExitOK, "IMDS_POLL_INTERVAL", ""},
		{"version", []string{"version"}, nil, daemon.ExitOK, version.String(), ""},
		{"unknown flag", []string{"--no-such-setting=1"}, nil, daemon.ExitConfig, "", "lifeboat-agent: invalid configuration:\n  flag provided but not defined: -no-such-setting"},
		{"bad value", nil, map[string]string{"IMDS_POLL_INTERVAL": "soon"}, daemon.ExitConfig, "", "IMDS_POLL_INTERVAL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clear(env)
			for k, v := range tc.env {
				env[k] = v
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, lookup, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, stdout.String())
			}
			if !strings.Contains(stderr.String(), tc.errs) {
				t.Errorf("stderr lacks %q:\n%s", tc.errs, stderr.String())
			}
			if tc.code == daemon.ExitConfig && !strings.Contains(stderr.String(), "Run 'lifeboat-agent --help'") {
				t.Errorf("a refusal does not say where the settings are listed:\n%s", stderr.String())
			}
		})
	}
}

// The agent's binary links neither the controller nor the AWS clients only the controller
// calls: that is what it is for.
func TestLinksNoControllerPart(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range []string{"lifeboat.dev/lifeboat/internal/controller", "lifeboat.dev/lifeboat/internal/preflight",
		"lifeboat.dev/lifeboat/internal/source/sqs", "github.com/aws/aws-sdk-go-v2/service/sqs",
		"github.com/aws/aws-sdk-go-v2/service/eks", "github.com/aws/aws-sdk-go-v2/service/eventbridge", "github.com/aws/aws-sdk-go-v2/service/ec2",
		"lifeboat.dev/lifeboat/internal/cloud/controlleronly", "github.com/spf13/cobra"} {
		for line := range strings.Lines(string(out)) {
			if strings.TrimSpace(line) == pkg {
				t.Errorf("lifeboat-agent links %s", pkg)
			}
		}
	}
}
