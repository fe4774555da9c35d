// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// IMDSFault is how an IMDSProxy misbehaves.
type IMDSFault int

const (
	IMDSHealthy     IMDSFault = iota
	IMDSServerError           // every request answers 500
	IMDSGarbage               // metadata reads answer 200 with a body no parser accepts
)

// IMDSProxy stands between Lifeboat and an instance-metadata mock. It can hide paths
// (answering 404, as IMDS does when there is no event) until shown, so a test knows the
// instant a notice became visible, and it can inject faults. Everything else is forwarded
// to the mock unchanged.
type IMDSProxy struct {
	URL string

	srv      *http.Server
	mu       sync.Mutex
	forward  *httputil.ReverseProxy
	hidden   map[string]bool
	fault    IMDSFault
	delay    time.Duration
	requests atomic.Int64
	answered map[string]int64 // by URL path, under mu
	answer   chan struct{}    // closed and replaced at every answer, under mu
}

// NewIMDSProxy starts a proxy on 127.0.0.1 in front of target (an IMDS.URL).
func NewIMDSProxy(target string) (*IMDSProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &IMDSProxy{URL: "http://" + ln.Addr().String(), hidden: map[string]bool{}, answered: map[string]int64{}, answer: make(chan struct{})}
	p.forward = httputil.NewSingleHostReverseProxy(u)
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		defer p.answered1(r.URL.Path)
		p.mu.Lock()
		hidden, fault, forward, delay := p.hidden[r.URL.Path], p.fault, p.forward, p.delay
		p.mu.Unlock()
		if delay > 0 {
			select {
			case <-r.Context().Done():
				return // the client gave up waiting
			case <-time.After(delay):
			}
		}
		switch {
		case fault == IMDSServerError:
			http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		case fault == IMDSGarbage && r.Method == http.MethodGet:
			w.Write([]byte("<html><body>\x00\xffnot metadata"))
		case hidden:
			http.NotFound(w, r)
		default:
			forward.ServeHTTP(w, r)
		}
	})}
	go p.srv.Serve(ln)
	return p, nil
}

// SetTarget sends forwarded requests to another mock from now on, e.g. one that reports the
// same event in a later state.
func (p *IMDSProxy) SetTarget(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.forward = httputil.NewSingleHostReverseProxy(u)
	p.mu.Unlock()
	return nil
}

// Hide makes path (e.g. /latest/meta-data/spot/instance-action) answer 404.
func (p *IMDSProxy) Hide(path string) { p.mu.Lock(); p.hidden[path] = true; p.mu.Unlock() }

// Show forwards path to the mock again.
func (p *IMDSProxy) Show(path string) { p.mu.Lock(); delete(p.hidden, path); p.mu.Unlock() }

// SetFault changes how the proxy answers.
func (p *IMDSProxy) SetFault(f IMDSFault) { p.mu.Lock(); p.fault = f; p.mu.Unlock() }

// SetDelay makes every answer wait d first, as an overloaded metadata service does (0: no
// delay). It combines with any fault.
func (p *IMDSProxy) SetDelay(d time.Duration) { p.mu.Lock(); p.delay = d; p.mu.Unlock() }

// Requests counts the requests received.
func (p *IMDSProxy) Requests() int64 { return p.requests.Load() }

// Answered counts the requests for path (e.g. /latest/meta-data/spot/instance-action)
// answered so far, whatever the answer.
func (p *IMDSProxy) Answered(path string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answered[path]
}

// AwaitAnswered waits until n requests for path have been answered in all, and reports
// whether they were before ctx ended: a test waits for the polls it means, answer by answer.
func (p *IMDSProxy) AwaitAnswered(ctx context.Context, path string, n int64) bool {
	for {
		p.mu.Lock()
		got, next := p.answered[path], p.answer
		p.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return false
		}
	}
}

func (p *IMDSProxy) answered1(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answered[path]++
	close(p.answer)
	p.answer = make(chan struct{})
}

// Close stops the proxy.
func (p *IMDSProxy) Close() { p.srv.Close() }
