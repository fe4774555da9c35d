// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// A delayed proxy makes an impatient client give up, and answers normally once the delay is
// lifted; faults apply after the delay.
func TestIMDSProxyDelay(t *testing.T) {
	mock := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("i-1")) }))
	defer mock.Close()
	p, err := NewIMDSProxy(mock.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	impatient := &http.Client{Timeout: 200 * time.Millisecond}
	get := func() (int, error) {
		resp, err := impatient.Get(p.URL + "/latest/meta-data/instance-id")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	p.SetDelay(5 * time.Second)
	if _, err := get(); !isTimeout(err) {
		t.Errorf("delayed answer: err %v, want the client's timeout", err)
	}
	p.SetFault(IMDSServerError)
	if _, err := get(); err == nil {
		t.Error("a delayed fault answered within the client's timeout")
	}
	p.SetDelay(0)
	if code, err := get(); err != nil || code != http.StatusInternalServerError {
		t.Errorf("fault without delay: %d %v, want 500", code, err)
	}
	p.SetFault(IMDSHealthy)
	if code, err := get(); err != nil || code != http.StatusOK {
		t.Errorf("healthy: %d %v, want 200", code, err)
	}
	if n := p.Requests(); n != 4 {
		t.Errorf("%d requests counted, want 4", n)
	}
}

// Answers are counted by path as they are given, and a wait for them ends with the one it
// waits for.
func TestIMDSProxyAnswered(t *testing.T) {
	mock := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("i-1")) }))
	defer mock.Close()
	p, err := NewIMDSProxy(mock.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const path = "/latest/meta-data/instance-id"
	p.Hide("/latest/meta-data/spot/instance-action")
	waited := make(chan bool)
	go func() { waited <- p.AwaitAnswered(context.Background(), path, 2) }()
	for _, q := range []string{path, "/latest/meta-data/spot/instance-action", path} {
		resp, err := http.Get(p.URL + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if !<-waited {
		t.Error("the wait for two answers did not end with them")
	}
	if n, hidden := p.Answered(path), p.Answered("/latest/meta-data/spot/instance-action"); n != 2 || hidden != 1 {
		t.Errorf("answered %d and %d, want 2 for the path and 1 for the hidden one", n, hidden)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if p.AwaitAnswered(ctx, path, 3) {
		t.Error("a wait for an answer never given reported it")
	}
}

func isTimeout(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) && ue.Timeout()
}
