// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// IMDSOptions configure one amazon-ec2-metadata-mock process, standing in for the instance
// metadata service of one node.
type IMDSOptions struct {
	Name       string // log and config file name; default "imds-<instance id>"
	InstanceID string
	Zone       string // default us-east-1a
	Hostname   string // local-hostname, usually the node name
	// Args select what the mock serves, e.g. {"spot", "-a", "terminate", "-t", "<RFC3339>"}.
	// Always pass a fixed time: without one the notice time moves on every request.
	// Empty: the root command, which serves every path (scheduled events, rebalance, ...).
	Args []string
	// AllowIMDSv1 serves requests without a session token; by default only IMDSv2 is served.
	AllowIMDSv1 bool
}

// IMDS is a running instance-metadata mock.
type IMDS struct {
	URL  string // base URL, e.g. http://127.0.0.1:40123
	proc *process
}

// StartIMDS starts the mock in dir and waits until it hands out IMDSv2 tokens.
func StartIMDS(ctx context.Context, tools Tools, dir string, o IMDSOptions) (*IMDS, error) {
	if o.Zone == "" {
		o.Zone = "us-east-1a"
	}
	if o.Name == "" {
		o.Name = "imds-" + o.InstanceID
	}
	values := map[string]string{
		"instance-id":                 o.InstanceID,
		"placement-availability-zone": o.Zone,
		"placement-region":            o.Zone[:len(o.Zone)-1],
	}
	if o.Hostname != "" {
		values["local-hostname"], values["hostname"] = o.Hostname, o.Hostname
	}
	cfg, err := json.Marshal(map[string]any{"metadata": map[string]any{"values": values}})
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, o.Name+".json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}
	var m *IMDS
	err = startOnFreePorts(func() (err error) {
		m, err = startIMDS(ctx, tools, dir, cfgPath, o)
		return err
	})
	return m, err
}

// startIMDS starts the mock on a port chosen now.
func startIMDS(ctx context.Context, tools Tools, dir, cfgPath string, o IMDSOptions) (*IMDS, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, o.Args...), "-c", cfgPath, "-n", "127.0.0.1", "-p", strconv.Itoa(ports[0]))
	if !o.AllowIMDSv1 {
		args = append(args, "-I")
	}
	p, err := startProcess(dir, o.Name, tools.Path("ec2-metadata-mock"), args, nil)
	if err != nil {
		return nil, err
	}
	m := &IMDS{URL: "http://127.0.0.1:" + strconv.Itoa(ports[0]), proc: p}
	err = p.waitReady(ctx, 20*time.Second, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, m.URL+"/latest/api/token", nil)
		req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("token request: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		p.Stop(time.Second)
		return nil, err
	}
	return m, nil
}

// Stop stops the mock.
func (m *IMDS) Stop() { m.proc.Stop(2 * time.Second) }

// LogPath is the mock's log file.
func (m *IMDS) LogPath() string { return m.proc.logPath }
