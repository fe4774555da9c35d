// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// SQSOptions configure the goaws SQS server.
type SQSOptions struct {
	Queues            []string // created at start
	AccountID         string   // default fakeaws.Account, the account the fake's messages name
	VisibilityTimeout int      // seconds, default 30
}

// SQS is a running goaws server.
type SQS struct {
	Endpoint  string            // base URL for the SDK's BaseEndpoint
	QueueURLs map[string]string // by queue name
	proc      *process
}

// StartSQS starts goaws in dir and waits until it accepts connections. Queue URLs take the
// form goaws gives them (http://127.0.0.1:PORT/ACCOUNT/QUEUE): with an empty region, goaws
// writes plain URLs the SDK can use directly.
func StartSQS(ctx context.Context, tools Tools, dir string, o SQSOptions) (*SQS, error) {
	if o.AccountID == "" {
		// Lifeboat accepts only messages of the account its queue URL names.
		o.AccountID = fakeaws.Account
	}
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = 30
	}
	var s *SQS
	err := startOnFreePorts(func() (err error) {
		s, err = startSQS(ctx, tools, dir, o)
		return err
	})
	return s, err
}

// startSQS starts goaws on a port chosen now.
func startSQS(ctx context.Context, tools Tools, dir string, o SQSOptions) (*SQS, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ports[0])
	var b strings.Builder
	fmt.Fprintf(&b, "Local:\n  Host: 127.0.0.1\n  Port: %s\n  Region: \"\"\n  AccountId: %q\n  LogToFile: false\n", port, o.AccountID)
	fmt.Fprintf(&b, "  QueueAttributeDefaults:\n    VisibilityTimeout: %d\n    ReceiveMessageWaitTimeSeconds: 0\n  Queues:\n", o.VisibilityTimeout)
	for _, q := range o.Queues {
		fmt.Fprintf(&b, "    - Name: %s\n", q)
	}
	cfgPath := filepath.Join(dir, "goaws.yaml")
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	p, err := startProcess(dir, "goaws", tools.Path("goaws"), []string{"-config", cfgPath, "Local"}, nil)
	if err != nil {
		return nil, err
	}
	s := &SQS{Endpoint: "http://127.0.0.1:" + port, QueueURLs: map[string]string{}, proc: p}
	for _, q := range o.Queues {
		s.QueueURLs[q] = s.Endpoint + "/" + o.AccountID + "/" + q
	}
	err = p.waitReady(ctx, 20*time.Second, func(ctx context.Context) error {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+port)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	if err != nil {
		p.Stop(time.Second)
		return nil, err
	}
	return s, nil
}

// Stop stops the server.
func (s *SQS) Stop() { s.proc.Stop(2 * time.Second) }

// LogPath is the server's log file.
func (s *SQS) LogPath() string { return s.proc.logPath }
