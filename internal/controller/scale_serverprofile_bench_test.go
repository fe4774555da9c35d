// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/test/sandbox"
)

// azServerProfileFor is how long each of the API server's CPU profiles lasts: as long as this
// process's own (azCPUProfileFor), so the two cover the same stretch of the burst.
const azServerProfileFor = azCPUProfileFor

// azServerProfiler takes the API server's CPU profiles that LIFEBOAT_SCALE_SERVER_PROFILE asks
// for (the server runs with --profiling then): one over the calibration's long step, one over
// the burst, so the same server's work for the plain evictor and for Lifeboat can be set side
// by side (go tool pprof -top -diff_base). They come from its /debug/pprof as the sandbox's admin.
type azServerProfiler struct {
	prefix  string // the files are prefix.long and prefix.burst
	cluster *sandbox.Cluster
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []error
	started map[string]bool
}

func azNewServerProfiler(prefix string, c *sandbox.Cluster) *azServerProfiler {
	return &azServerProfiler{prefix: prefix, cluster: c, started: map[string]bool{}}
}

// azServerProfileArgs are the API server's arguments that let it be profiled.
func azServerProfileArgs(prefix string) []string {
	if prefix == "" {
		return nil
	}
	return []string{"--profiling=true"} // the sandbox's default is off; the later flag wins
}

// start takes the profile named what (once), after the given wait, in the background.
func (p *azServerProfiler) start(ctx context.Context, what string, after time.Duration) {
	if p == nil || p.prefix == "" || p.started[what] {
		return
	}
	p.started[what] = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		select {
		case <-ctx.Done():
			return
		case <-time.After(after):
		}
		if err := azFetchServerProfile(ctx, p.cluster, azServerProfileFor, p.prefix+"."+what); err != nil {
			p.mu.Lock()
			p.errs = append(p.errs, fmt.Errorf("the API server's CPU profile over the %s: %w", what, err))
			p.mu.Unlock()
		}
	}()
}

// wait returns once every profile started is written, with what went wrong.
func (p *azServerProfiler) wait() []error {
	if p == nil {
		return nil
	}
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errs
}

// azFetchServerProfile writes kube-apiserver's CPU profile over d to path.
func azFetchServerProfile(ctx context.Context, c *sandbox.Cluster, d time.Duration, path string) error {
	hc, err := rest.HTTPClientFor(c.AdminConfig)
	if err != nil {
		return err
	}
	hc.Timeout = d + 30*time.Second
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", c.APIServerURL, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
