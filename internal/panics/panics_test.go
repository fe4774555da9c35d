// SPDX-License-Identifier: Apache-2.0

package panics_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"lifeboat.dev/lifeboat/internal/panics"
)

// counter counts by site.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) PanicRecovered(site string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[site]++
}

// A panic in a unit of work run by Do, or deferred Recover, is counted under its site,
// logged at ERROR with its value, the stack, the site's consequence and the caller's attrs,
// and comes back as an *Error; without a panic nothing is counted or logged. A redacting
// site hides its secret from both the log and the error.
func TestRecover(t *testing.T) {
	tests := []struct {
		name      string
		run       func(log *slog.Logger, c panics.Counter) error
		wantErr   string
		wantLog   []string
		wantNoLog string
	}{
		{
			name: "Do",
			run: func(log *slog.Logger, c panics.Counter) error {
				return panics.Do(panics.Eviction, log, c, func() { panic("bad pod") }, "pod", "shop/web-1")
			},
			wantErr: "panic in eviction: bad pod",
			wantLog: []string{"level=ERROR", "site=eviction", `panic="bad pod"`, "pod=shop/web-1", "panics_test.go", "this pod's eviction failed"},
		},
		{
			name: "deferred Recover, a runtime error",
			run: func(log *slog.Logger, c panics.Counter) (err error) {
				defer panics.Recover(panics.Notice, log, c, &err, "notice", "n-1")
				var m map[string]int
				m["x"] = 1
				return nil
			},
			wantErr: "panic in notice: assignment to entry in nil map",
			wantLog: []string{"site=notice", "notice=n-1", "assignment to entry in nil map"},
		},
		{
			name: "redacted",
			run: func(log *slog.Logger, c panics.Counter) (err error) {
				defer panics.RecoverRedacted(panics.Webhook, log, c, &err, strings.NewReplacer("hooks.example.com", "<redacted>").Replace)
				panic("post https://hooks.example.com/T0/secret")
			},
			wantErr:   "panic in webhook: post https://<redacted>/T0/secret",
			wantLog:   []string{"site=webhook", "<redacted>"},
			wantNoLog: "hooks.example.com",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			c := &counter{}
			err := tt.run(slog.New(slog.NewTextHandler(&out, nil)), c)
			var pe *panics.Error
			if !errors.As(err, &pe) || err.Error() != tt.wantErr {
				t.Fatalf("error %v, want an *Error %q", err, tt.wantErr)
			}
			if site := strings.TrimPrefix(strings.SplitN(tt.wantErr, ":", 2)[0], "panic in "); c.n[site] != 1 || len(c.n) != 1 {
				t.Errorf("counted %v, want one under %s", c.n, site)
			}
			for _, want := range tt.wantLog {
				if !strings.Contains(out.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, out.String())
				}
			}
			if tt.wantNoLog != "" && strings.Contains(out.String(), tt.wantNoLog) {
				t.Errorf("log holds %q:\n%s", tt.wantNoLog, out.String())
			}
		})
	}
}

func TestNoPanic(t *testing.T) {
	var out bytes.Buffer
	c := &counter{}
	if err := panics.Do(panics.Webhook, slog.New(slog.NewTextHandler(&out, nil)), c, func() {}); err != nil {
		t.Fatal(err)
	}
	if len(c.n) != 0 || out.Len() != 0 {
		t.Errorf("counted %v and logged %q without a panic", c.n, out.String())
	}
	// No counter and no logger: still recovered.
	if err := panics.Do(panics.Webhook, slog.New(slog.DiscardHandler), nil, func() { panic(1) }); err == nil {
		t.Error("no error for a panic")
	}
}

// Site names are snake_case label values, and unique.
func TestSites(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range panics.Sites {
		if s.Name == "" || strings.ToLower(s.Name) != s.Name || strings.ContainsAny(s.Name, " -") || s.Then == "" {
			t.Errorf("site %+v: want a snake_case name and a consequence", s)
		}
		if seen[s.Name] {
			t.Errorf("site %s listed twice", s.Name)
		}
		seen[s.Name] = true
	}
}
