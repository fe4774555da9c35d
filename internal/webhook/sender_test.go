// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/panics/panicstest"
)

// recorder is a webhook endpoint that answers from a script and records what it got.
type recorder struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   []string
	times    []time.Time
	answer   func(attempt int, w http.ResponseWriter, r *http.Request)
}

func (e *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	e.requests = append(e.requests, r)
	e.bodies = append(e.bodies, string(body))
	e.times = append(e.times, time.Now())
	n := len(e.requests)
	e.mu.Unlock()
	e.answer(n, w, r)
}

func (e *recorder) count() int { e.mu.Lock(); defer e.mu.Unlock(); return len(e.requests) }

// statuses answers the i-th request with codes[i] (the last code repeats).
func statuses(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(codes[min(n, len(codes))-1])
	}
}

func endpoint(t *testing.T, answer func(int, http.ResponseWriter, *http.Request)) (*recorder, *httptest.Server) {
	t.Helper()
	rec := &recorder{answer: answer}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return rec, srv
}

// fast keeps retries quick; tests that need other values override them.
func fast(o Options) Options {
	if o.InitialBackoff == 0 {
		o.InitialBackoff = time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Millisecond
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 5 * time.Second
	}
	if o.MaxElapsed == 0 {
		o.MaxElapsed = 30 * time.Second
	}
	return o
}

type results struct {
	mu  sync.Mutex
	got []string
}

func (r *results) observe(s string) { r.mu.Lock(); defer r.mu.Unlock(); r.got = append(r.got, s) }
func (r *results) list() []string   { r.mu.Lock(); defer r.mu.Unlock(); return slices.Clone(r.got) }

// logBuffer collects the sender's log lines, written from its goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.String() }

func newSender(t *testing.T, cfg Settings, o Options) (*Sender, *results, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	res := &results{}
	o = fast(o)
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.Observe = res.observe
	s, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return s, res, logs
}

func testConfig(url string, pairs ...string) Settings {
	c := Settings{URL: url, Template: DefaultTemplate,
		Headers: map[string]string{"Content-type": "application/json"}}
	for i := 0; i+1 < len(pairs); i += 2 {
		switch pairs[i] {
		case "proxy":
			c.Proxy = pairs[i+1]
		case "template":
			c.Template = pairs[i+1]
		default:
			c.Headers[pairs[i]] = pairs[i+1]
		}
	}
	return c
}

func TestSendPostsRenderedBodyWithHeaders(t *testing.T) {
	rec, srv := endpoint(t, statuses(200))
	s, res, _ := newSender(t, testConfig(srv.URL+"/hook", "X-Team", "infra"), Options{})
	if err := s.Send(context.Background(), notification()); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 1 {
		t.Fatalf("%d requests, want 1", rec.count())
	}
	r := rec.requests[0]
	if r.Method != http.MethodPost || r.URL.Path != "/hook" {
		t.Errorf("request %s %s, want POST /hook", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	if got := r.Header.Get("X-Team"); got != "infra" {
		t.Errorf("X-Team %q", got)
	}
	var msg map[string]string
	if err := json.Unmarshal([]byte(rec.bodies[0]), &msg); err != nil || !strings.Contains(msg["text"], "spot-i-0abc") {
		t.Errorf("body %q (%v): want the default template's JSON naming the event", rec.bodies[0], err)
	}
	if got := res.list(); !slices.Equal(got, []string{ResultSent}) {
		t.Errorf("observed %v", got)
	}
}

func TestSendRetries(t *testing.T) {
	tests := []struct {
		name         string
		codes        []int
		opts         Options
		wantAttempts int
		wantErr      string // "" = success
	}{
		{"success at once", []int{204}, Options{}, 1, ""},
		{"500 then success", []int{500, 200}, Options{}, 2, ""},
		{"502, 503 then success", []int{502, 503, 200}, Options{}, 3, ""},
		{"429 then success", []int{429, 200}, Options{}, 2, ""},
		{"400 is not retried", []int{400, 200}, Options{}, 1, "endpoint answered 400 Bad Request"},
		{"403 is not retried", []int{403, 200}, Options{}, 1, "endpoint answered 403 Forbidden"},
		{"404 is not retried", []int{404, 200}, Options{}, 1, "endpoint answered 404 Not Found"},
		{"a redirect is not followed", []int{302, 200}, Options{}, 1, "endpoint answered 302 Found"},
		{"attempts are bounded", []int{500}, Options{MaxAttempts: 3}, 3, "gave up after 3 attempts: endpoint answered 500"},
		{"default bound", []int{503}, Options{}, 5, "gave up after 5 attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, srv := endpoint(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if tt.codes[min(n, len(tt.codes))-1] == 302 {
					http.Redirect(w, r, "/elsewhere", http.StatusFound)
					return
				}
				statuses(tt.codes...)(n, w, r)
			})
			s, res, _ := newSender(t, testConfig(srv.URL), tt.opts)
			err := s.Send(context.Background(), notification())
			if rec.count() != tt.wantAttempts {
				t.Errorf("%d requests, want %d", rec.count(), tt.wantAttempts)
			}
			want := []string{ResultSent}
			if tt.wantErr != "" {
				want = []string{ResultFailed}
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Errorf("error %v", err)
			}
			if got := res.list(); !slices.Equal(got, want) {
				t.Errorf("observed %v, want %v", got, want)
			}
		})
	}
}

func TestSendHonoursRetryAfter(t *testing.T) {
	t.Run("seconds", func(t *testing.T) {
		rec, srv := endpoint(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		s, _, _ := newSender(t, testConfig(srv.URL), Options{})
		if err := s.Send(context.Background(), notification()); err != nil {
			t.Fatal(err)
		}
		if rec.count() != 2 {
			t.Fatalf("%d requests, want 2", rec.count())
		}
		// A lower bound only: the sender may wait longer on a busy machine, never less.
		if gap := rec.times[1].Sub(rec.times[0]); gap < time.Second {
			t.Errorf("second attempt %s after the first; Retry-After asked for 1s", gap)
		}
	})
	t.Run("capped", func(t *testing.T) {
		rec, srv := endpoint(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				w.Header().Set("Retry-After", "3600")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		s, _, logs := newSender(t, testConfig(srv.URL), Options{MaxRetryAfter: 20 * time.Millisecond})
		if err := s.Send(context.Background(), notification()); err != nil {
			t.Fatal(err)
		}
		if rec.count() != 2 || !strings.Contains(logs.String(), "retry_in=20ms") {
			t.Fatalf("%d requests, logs:\n%s\nwant 2 requests and a 20ms wait", rec.count(), logs)
		}
	})
	t.Run("longer than the time limit", func(t *testing.T) {
		rec, srv := endpoint(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
		})
		s, _, _ := newSender(t, testConfig(srv.URL), Options{MaxRetryAfter: 2 * time.Hour, MaxElapsed: 5 * time.Second})
		err := s.Send(context.Background(), notification())
		if err == nil || !strings.Contains(err.Error(), "time limit") || rec.count() != 1 {
			t.Fatalf("%d requests, error %v; want one request and a time-limit error", rec.count(), err)
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"7", 7 * time.Second},
		{" 7 ", 7 * time.Second},
		{"9999999", 24 * time.Hour}, // capped at a day before MaxRetryAfter applies
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestSendWhenTheEndpointIsDown(t *testing.T) {
	t.Run("connections refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		s, res, logs := newSender(t, testConfig("http://"+addr+"/hook"), Options{MaxAttempts: 4})
		err = s.Send(context.Background(), notification())
		if err == nil || !strings.Contains(err.Error(), "gave up after 4 attempts") || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("error %v", err)
		}
		if n := strings.Count(logs.String(), "retrying"); n != 3 {
			t.Errorf("%d retries logged, want 3:\n%s", n, logs)
		}
		if got := res.list(); !slices.Equal(got, []string{ResultFailed}) {
			t.Errorf("observed %v", got)
		}
	})
	t.Run("connections dropped", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var mu sync.Mutex
		accepted := 0
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				accepted++
				mu.Unlock()
				c.Close()
			}
		}()
		s, _, _ := newSender(t, testConfig("http://"+l.Addr().String()), Options{MaxAttempts: 3})
		if err := s.Send(context.Background(), notification()); err == nil {
			t.Fatal("no error")
		}
		mu.Lock()
		defer mu.Unlock()
		// The HTTP client may retry a dropped idempotent-looking request once itself; a POST
		// it does not, so each attempt is one connection.
		if accepted != 3 {
			t.Errorf("%d connections, want 3", accepted)
		}
	})
	t.Run("hanging endpoint bounded by the time limit", func(t *testing.T) {
		release := make(chan struct{})
		rec, srv := endpoint(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		defer close(release)
		s, _, _ := newSender(t, testConfig(srv.URL), Options{MaxAttempts: 1000, RequestTimeout: 100 * time.Millisecond, MaxElapsed: time.Second})
		err := s.Send(context.Background(), notification())
		if err == nil || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("error %v, want a timeout", err)
		}
		// One second of 100 ms attempts with waits between them: far fewer than 1000.
		if n := rec.count(); n < 1 || n > 15 {
			t.Errorf("%d requests, want between 1 and 15", n)
		}
	})
}

func TestSendStopsWithItsContext(t *testing.T) {
	_, srv := endpoint(t, statuses(500))
	s, _, _ := newSender(t, testConfig(srv.URL), Options{InitialBackoff: time.Hour, MaxBackoff: time.Hour, MaxElapsed: 3 * time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	err := s.Send(ctx, notification())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestSendThroughProxy(t *testing.T) {
	target, targetSrv := endpoint(t, statuses(200))
	var mu sync.Mutex
	var seen []*http.Request
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer proxy.Close()
	proxyURL := strings.Replace(proxy.URL, "http://", "http://lifeboat:proxy-pass@", 1)

	s, res, _ := newSender(t, testConfig(targetSrv.URL+"/hook?x=1", "proxy", proxyURL, "X-Team", "infra"), Options{})
	if err := s.Send(context.Background(), notification()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("proxy saw %d requests, want 1", len(seen))
	}
	r := seen[0]
	// A forward proxy gets the absolute target URL, the headers and its own credentials.
	if r.Method != http.MethodPost || r.URL.String() != targetSrv.URL+"/hook?x=1" {
		t.Errorf("proxy saw %s %s", r.Method, r.URL)
	}
	if r.Header.Get("X-Team") != "infra" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("proxy saw headers %v", r.Header)
	}
	if r.Header.Get("Proxy-Authorization") == "" {
		t.Error("no Proxy-Authorization for a proxy URL with credentials")
	}
	if target.count() != 0 {
		t.Errorf("the target was reached directly %d times", target.count())
	}
	if got := res.list(); !slices.Equal(got, []string{ResultSent}) {
		t.Errorf("observed %v", got)
	}
}

// No error and no log line may contain the URL (path, query, host), the proxy URL or a
// header value, whatever fails.
func TestSecretsNeverInErrorsOrLogs(t *testing.T) {
	const (
		pathSecret   = "T0123/B0456/pathsecretXYZ"
		querySecret  = "querysecretABC"
		headerSecret = "Bearer headersecretDEF"
		proxySecret  = "proxysecretGHI"
	)
	secrets := []string{pathSecret, "pathsecretXYZ", querySecret, headerSecret, "headersecretDEF", proxySecret}

	freePort := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	echo := func(code int) func(int, http.ResponseWriter, *http.Request) {
		return func(_ int, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			// A careless endpoint that echoes the request back.
			fmt.Fprintf(w, "rejected %s with %s", r.URL.String(), r.Header.Get("Authorization"))
		}
	}
	tests := []struct {
		name  string
		setup func(t *testing.T) (url, proxy string)
		opts  Options
	}{
		{"400 echoing the request", func(t *testing.T) (string, string) {
			_, srv := endpoint(t, echo(400))
			return srv.URL, ""
		}, Options{}},
		{"500 echoing the request", func(t *testing.T) (string, string) {
			_, srv := endpoint(t, echo(500))
			return srv.URL, ""
		}, Options{MaxAttempts: 2}},
		{"endpoint down", func(t *testing.T) (string, string) {
			return "http://" + freePort(t), ""
		}, Options{MaxAttempts: 2}},
		{"endpoint hangs", func(t *testing.T) (string, string) {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			_, srv := endpoint(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done():
				}
			})
			return srv.URL, ""
		}, Options{MaxAttempts: 2, RequestTimeout: 50 * time.Millisecond}},
		{"proxy down", func(t *testing.T) (string, string) {
			_, srv := endpoint(t, statuses(200))
			return srv.URL, "http://lifeboat:" + proxySecret + "@" + freePort(t)
		}, Options{MaxAttempts: 2}},
		{"proxy refuses", func(t *testing.T) (string, string) {
			_, target := endpoint(t, statuses(200))
			_, proxy := endpoint(t, echo(407))
			return target.URL, strings.Replace(proxy.URL, "http://", "http://lifeboat:"+proxySecret+"@", 1)
		}, Options{}},
		{"TLS to a plain endpoint", func(t *testing.T) (string, string) {
			_, srv := endpoint(t, statuses(200))
			return strings.Replace(srv.URL, "http://", "https://", 1), ""
		}, Options{MaxAttempts: 1}},
		{"template fails", func(t *testing.T) (string, string) {
			_, srv := endpoint(t, statuses(200))
			return srv.URL, ""
		}, Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, proxy := tt.setup(t)
			cfg := testConfig(u+"/hooks/"+pathSecret+"?token="+querySecret, "Authorization", headerSecret)
			cfg.Proxy = proxy
			if tt.name == "template fails" {
				cfg.Template = `{{ .NodeLabels.absent }}`
			}
			s, _, logs := newSender(t, cfg, tt.opts)
			err := s.Send(context.Background(), notification())
			if err == nil {
				t.Fatal("Send succeeded; the case must fail")
			}
			for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), logs.String()} {
				for _, secret := range append(secrets, cfg.URL, proxy) {
					if secret != "" && strings.Contains(text, secret) {
						t.Errorf("%q leaked into:\n%s", secret, text)
					}
				}
			}
			if !strings.Contains(logs.String(), "webhook not") {
				t.Errorf("the failure was not logged:\n%s", logs)
			}
			t.Logf("error: %v", err)
		})
	}
}

func TestNewValidates(t *testing.T) {
	const secret = "sekrit-value"
	tests := []struct {
		name    string
		cfg     Settings
		wantErr string
	}{
		{"disabled", Settings{}, ""},
		{"not a URL", Settings{URL: "hooks.example/" + secret}, "WEBHOOK_URL: not an absolute http or https URL"},
		{"wrong scheme", Settings{URL: "ftp://" + secret + "/x"}, "WEBHOOK_URL: not an absolute http or https URL"},
		{"proxy not a URL", Settings{URL: "http://127.0.0.1/", Proxy: "::" + secret}, "WEBHOOK_PROXY: not an absolute URL"},
		{"proxy scheme", Settings{URL: "http://127.0.0.1/", Proxy: "tcp://" + secret + ":1"}, "WEBHOOK_PROXY: scheme not supported"},
		{"header name", Settings{URL: "http://127.0.0.1/", Headers: map[string]string{"Bad Name": secret}}, `WEBHOOK_HEADERS: "Bad Name" is not a valid header name`},
		{"header value", Settings{URL: "http://127.0.0.1/", Headers: map[string]string{"X-Token": secret + "\r\nInjected: 1"}}, `WEBHOOK_HEADERS: the value of "X-Token" is not a valid header value`},
		{"template", Settings{URL: "http://127.0.0.1/", Template: `{{ env "HOME" }}`}, `WEBHOOK_TEMPLATE: not a valid Go template`},
		{"template from a file", Settings{URL: "http://127.0.0.1/", TemplateFile: "/etc/lifeboat/hook.tmpl", Template: `{{ .Nope }}`},
			`WEBHOOK_TEMPLATE_FILE="/etc/lifeboat/hook.tmpl": WEBHOOK_TEMPLATE: fails on a sample notification`},
		{"empty template means the default", Settings{URL: "http://127.0.0.1/"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.cfg, Options{})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.Enabled() != (tt.cfg.URL != "") {
					t.Errorf("Enabled() = %v", s.Enabled())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q contains the value", err)
			}
		})
	}
}

func TestDisabledSenderDoesNothing(t *testing.T) {
	res := &results{}
	s, err := New(Settings{Template: `{{ .Nope }}`}, Options{Observe: res.observe})
	if err != nil {
		t.Fatal("a disabled sender must not care about the template:", err)
	}
	if s.Enabled() {
		t.Fatal("enabled without WEBHOOK_URL")
	}
	if err := s.Send(context.Background(), notification()); err != nil {
		t.Fatal(err)
	}
	var nilSender *Sender
	if nilSender.Enabled() || nilSender.Send(context.Background(), notification()) != nil {
		t.Fatal("a nil sender must be a disabled one")
	}
	if got := res.list(); len(got) != 0 {
		t.Errorf("observed %v", got)
	}
}

func TestSendTemplateFailureSendsNothing(t *testing.T) {
	rec, srv := endpoint(t, statuses(200))
	s, res, _ := newSender(t, testConfig(srv.URL, "template", `{"team":{{ $.JSON .NodeLabels.owner }}}`), Options{})
	err := s.Send(context.Background(), notification())
	if err == nil || !strings.Contains(err.Error(), `map has no entry for key "owner"`) {
		t.Fatalf("error %v", err)
	}
	if rec.count() != 0 {
		t.Errorf("%d requests for a notification that did not render", rec.count())
	}
	if got := res.list(); !slices.Equal(got, []string{ResultInvalid}) {
		t.Errorf("observed %v", got)
	}
}

// roundTripper is an http.RoundTripper from a function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A send that panics (here in the HTTP transport, with the URL in its panic) is that send's
// error: counted under site webhook, observed failed, logged with the stack, and the URL's
// secret kept out of both the error and the log. The next send goes out.
func TestSendPanicIsThatSendsError(t *testing.T) {
	const secret = "T0123/B0456/pathsecretXYZ"
	rec, srv := endpoint(t, statuses(200))
	count := &panicstest.Counter{}
	s, res, logs := newSender(t, testConfig(srv.URL+"/"+secret), Options{Panics: count})
	working := s.client.Transport
	s.client.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
		panic("a bug met posting to " + r.URL.String())
	})
	err := s.Send(context.Background(), Notification{EventID: "e1", Kind: "spot-interruption"})
	if _, panicked := errors.AsType[*panics.Error](err); !panicked || !strings.Contains(err.Error(), "a bug met posting to") {
		t.Fatalf("error %v, want the panic", err)
	}
	if got := count.Get("webhook"); got != 1 {
		t.Errorf("panics counted %d, want one under webhook", got)
	}
	if got := res.list(); !slices.Equal(got, []string{ResultFailed}) {
		t.Errorf("observed %v, want failed", got)
	}
	for _, want := range []string{"level=ERROR", "site=webhook", "event_id=e1", "sender_test.go"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	for _, leak := range []string{secret, "pathsecretXYZ", srv.Listener.Addr().String()} {
		if strings.Contains(err.Error(), leak) || strings.Contains(logs.String(), leak) {
			t.Errorf("%q leaked into the error (%v) or the log:\n%s", leak, err, logs)
		}
	}
	s.client.Transport = working
	if err := s.Send(context.Background(), Notification{EventID: "e2"}); err != nil || rec.count() != 1 {
		t.Errorf("the next send: %v, %d requests; want it sent", err, rec.count())
	}
}

// A template refused at a notice is reported as every render failure is: the send fails, the
// result is counted as invalid and the log says why; nothing is posted and nothing crashes.
func TestSendRefusedTemplateIsReported(t *testing.T) {
	rec, srv := endpoint(t, statuses(200))
	s, res, logs := newSender(t, testConfig(srv.URL, "template", guardedTemplate), Options{})
	err := s.Send(context.Background(), notification())
	if err == nil || !strings.Contains(err.Error(), "error calling indent: output would be 17180131328 bytes, more than the limit of 131072") {
		t.Fatalf("error %v", err)
	}
	if rec.count() != 0 {
		t.Errorf("%d requests", rec.count())
	}
	if got := res.list(); !slices.Equal(got, []string{ResultInvalid}) {
		t.Errorf("observed %v", got)
	}
	if line := logs.String(); !strings.Contains(line, "webhook not sent: template failed") || !strings.Contains(line, "error calling indent") {
		t.Errorf("log: %s", line)
	}
}
