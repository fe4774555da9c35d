// SPDX-License-Identifier: Apache-2.0

// Package webhook posts a templated message per node interruption to WEBHOOK_URL, with NTH's
// template fields and settings (WEBHOOK_PROXY, WEBHOOK_HEADERS, WEBHOOK_TEMPLATE,
// WEBHOOK_TEMPLATE_FILE).
//
// The URL, the proxy URL and the header values are secrets (Slack and similar services put
// the credential in the URL): they never appear in a log line or a returned error. Errors
// from the HTTP stack name the URL, so they are rewritten before they leave the package.
package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/panics"
)

// Settings are what the operator sets: the WEBHOOK_* settings of NTH's configuration.
type Settings struct {
	// URL is WEBHOOK_URL; empty disables the sender.
	URL string
	// Proxy is WEBHOOK_PROXY; empty: the usual HTTPS_PROXY / HTTP_PROXY / NO_PROXY apply.
	Proxy string
	// Headers is WEBHOOK_HEADERS; nil: Content-Type application/json (a Content-Type is
	// added when the map has none).
	Headers map[string]string
	// Template is WEBHOOK_TEMPLATE, or WEBHOOK_TEMPLATE_FILE's content; empty: DefaultTemplate.
	Template string
	// TemplateFile is WEBHOOK_TEMPLATE_FILE, named in errors about the template.
	TemplateFile string
	// NTHKinds is WEBHOOK_NTH_KINDS: templates see NTH's values of Kind and Monitor.
	NTHKinds bool
}

// DefaultTemplate is the message a user gets when they set only WEBHOOK_URL: a Slack-style
// {"text": ...} body that stays valid JSON whatever the values.
const DefaultTemplate = `{"text":{{ .JSON (printf "[Lifeboat] %s notice %s: instance %s (node %s) is being drained. %s Start time: %s" .Kind .EventID .InstanceID .NodeName .Description (.StartTime.UTC.Format "2006-01-02 15:04:05 MST")) }}}`

// Results passed to Options.Observe, one per Send of an enabled sender.
const (
	ResultSent    = "sent"    // the endpoint answered 2xx
	ResultFailed  = "failed"  // every attempt failed, or the endpoint refused the request
	ResultInvalid = "invalid" // the template could not render this notification
)

// Options tune delivery. Zero fields take the defaults in parentheses.
type Options struct {
	// MaxAttempts bounds the requests per notification (5).
	MaxAttempts int
	// MaxElapsed bounds one Send, waits included (2 minutes); no attempt starts after it.
	MaxElapsed time.Duration
	// RequestTimeout bounds each request, connection and response body included (10 s).
	RequestTimeout time.Duration
	// InitialBackoff is the wait before the second attempt (500 ms); it doubles per attempt
	// up to MaxBackoff (15 s). Each wait is jittered to between half and all of its value.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// MaxRetryAfter caps a Retry-After answer (30 s), so an endpoint cannot park the sender.
	MaxRetryAfter time.Duration
	// Logger receives one line per failed attempt and per outcome; nil discards.
	Logger *slog.Logger
	// Observe, when set, receives one Result* per Send (for a metric).
	Observe func(result string)
	// Panics, when set, counts the Sends that panicked (site webhook): such a Send fails
	// with the panic as its error (redacted, like every error here), and is observed failed.
	Panics panics.Counter
}

func (o *Options) defaults() {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.MaxElapsed <= 0 {
		o.MaxElapsed = 2 * time.Minute
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Second
	}
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 15 * time.Second
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observe == nil {
		o.Observe = func(string) {}
	}
}

// Sender posts notifications. A Sender built without WEBHOOK_URL, or a nil one, does
// nothing. It is safe for concurrent use; it does not coalesce: one Send, one message.
type Sender struct {
	url      string
	headers  http.Header
	template *Template
	nthKinds bool
	client   *http.Client
	redact   *strings.Replacer
	opts     Options
}

// New builds a sender from the settings (see Settings). Errors name the setting, never its
// value.
func New(cfg Settings, opts Options) (*Sender, error) {
	opts.defaults()
	s := &Sender{opts: opts}
	if cfg.URL == "" {
		return s, nil
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, errors.New("WEBHOOK_URL: not an absolute http or https URL")
	}
	secrets := urlSecrets(u)
	proxy, proxySecrets, err := proxyOf(cfg.Proxy)
	if err != nil {
		return nil, err
	}
	secrets = append(secrets, proxySecrets...)
	headers, headerSecrets, err := headersOf(cfg.Headers)
	if err != nil {
		return nil, err
	}
	secrets = append(secrets, headerSecrets...)
	if s.template, err = templateOf(cfg); err != nil {
		return nil, err
	}
	s.headers = headers
	s.client = newClient(proxy)
	s.url = u.String()
	s.nthKinds = cfg.NTHKinds
	s.redact = newRedactor(secrets)
	return s, nil
}

// proxyOf is the proxy WEBHOOK_PROXY names, or the environment's when it is empty, with the
// secrets its URL holds.
func proxyOf(raw string) (proxy func(*http.Request) (*url.URL, error), secrets []string, err error) {
	if raw == "" {
		return http.ProxyFromEnvironment, nil, nil
	}
	p, err := url.Parse(raw)
	if err != nil || p.Host == "" {
		return nil, nil, errors.New("WEBHOOK_PROXY: not an absolute URL")
	}
	switch p.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return nil, nil, errors.New("WEBHOOK_PROXY: scheme not supported (use http, https or socks5)")
	}
	return http.ProxyURL(p), urlSecrets(p), nil
}

// headersOf checks the headers of WEBHOOK_HEADERS (JSON content by default) and returns them
// with their values, which are kept out of errors and logs.
func headersOf(hs map[string]string) (headers http.Header, secrets []string, err error) {
	headers = http.Header{}
	if hs == nil {
		hs = map[string]string{"Content-Type": "application/json"}
	}
	names := make([]string, 0, len(hs))
	for k := range hs {
		names = append(names, k)
	}
	sort.Strings(names) // stable error messages
	for _, k := range names {
		v := hs[k]
		if !validHeaderName(k) {
			return nil, nil, fmt.Errorf("WEBHOOK_HEADERS: %q is not a valid header name", k)
		}
		if !validHeaderValue(v) {
			return nil, nil, fmt.Errorf("WEBHOOK_HEADERS: the value of %q is not a valid header value", k)
		}
		headers.Set(k, v)
		secrets = append(secrets, v)
	}
	if headers.Get("Content-Type") == "" {
		headers.Set("Content-Type", "application/json")
	}
	return headers, secrets, nil
}

// templateOf parses WEBHOOK_TEMPLATE, or the default; an error names the file the template
// came from, if it came from one.
func templateOf(cfg Settings) (*Template, error) {
	text := cfg.Template
	if text == "" {
		text = DefaultTemplate
	}
	t, err := ParseTemplate(text)
	if err != nil {
		if cfg.TemplateFile != "" {
			return nil, fmt.Errorf("WEBHOOK_TEMPLATE_FILE=%q: %w", cfg.TemplateFile, err)
		}
		return nil, err
	}
	return t, nil
}

func newClient(proxy func(*http.Request) (*url.URL, error)) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = proxy
	return &http.Client{
		Transport: transport,
		// A redirect would turn the POST into a GET and could carry the body elsewhere;
		// a webhook endpoint that moved is reported as a failure instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Enabled reports whether WEBHOOK_URL is set.
func (s *Sender) Enabled() bool { return s != nil && s.url != "" }

// Send renders n and posts it, retrying network errors, 429 and 5xx answers with
// exponential backoff (honouring Retry-After up to MaxRetryAfter) until an attempt succeeds,
// MaxAttempts requests were made or MaxElapsed has passed. Other answers are not retried.
// It returns nil when the sender is disabled. The error never contains the URL, the proxy
// or a header value. A panic while sending is this send's error; nothing else is stopped.
func (s *Sender) Send(ctx context.Context, n Notification) (err error) {
	if !s.Enabled() {
		return nil
	}
	defer func() {
		if _, panicked := errors.AsType[*panics.Error](err); panicked {
			s.opts.Observe(ResultFailed)
		}
	}()
	defer panics.RecoverRedacted(panics.Webhook, s.opts.Logger, s.opts.Panics, &err, s.redact.Replace, "event_id", n.EventID)
	return s.send(ctx, n)
}

// send is one Send of an enabled sender.
func (s *Sender) send(ctx context.Context, n Notification) error {
	n = withPlacement(n)
	if s.nthKinds {
		n = asNTH(n)
	}
	body, err := s.template.Render(n)
	if err != nil {
		s.opts.Observe(ResultInvalid)
		err = errors.New(s.redact.Replace(err.Error()))
		s.opts.Logger.Error("webhook not sent: template failed", "event_id", n.EventID, "error", err)
		return err
	}
	err = s.deliver(ctx, n.EventID, body)
	if err != nil {
		s.opts.Observe(ResultFailed)
		s.opts.Logger.Error("webhook not delivered", "event_id", n.EventID, "error", err)
		return err
	}
	s.opts.Observe(ResultSent)
	return nil
}

func (s *Sender) deliver(ctx context.Context, eventID string, body []byte) error {
	parent := ctx
	deadline := time.Now().Add(s.opts.MaxElapsed)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	backoff := s.opts.InitialBackoff
	for attempt := 1; ; attempt++ {
		status, retryAfter, err := s.post(ctx, body)
		if err != nil && parent.Err() != nil {
			return fmt.Errorf("webhook: stopped after %s: %w (last error: %v)", attempts(attempt), context.Cause(parent), err)
		}
		if err == nil {
			s.opts.Logger.Info("webhook sent", "event_id", eventID, "attempt", attempt, "status", status)
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return fmt.Errorf("webhook: attempt %d: %w", attempt, err)
		}
		if attempt >= s.opts.MaxAttempts {
			return fmt.Errorf("webhook: gave up after %s: %w", attempts(attempt), err)
		}
		wait := jitter(backoff)
		if retryAfter > 0 {
			wait = min(retryAfter, s.opts.MaxRetryAfter)
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
		if time.Until(deadline) < wait {
			return fmt.Errorf("webhook: gave up after %s (%s time limit): %w", attempts(attempt), s.opts.MaxElapsed, err)
		}
		s.opts.Logger.Warn("webhook attempt failed, retrying", "event_id", eventID, "attempt", attempt, "retry_in", wait.Round(time.Millisecond), "error", err)
		t := time.NewTimer(wait)
		select {
		case <-parent.Done():
			t.Stop()
			return fmt.Errorf("webhook: stopped after %s: %w (last error: %v)", attempts(attempt), context.Cause(parent), err)
		case <-t.C:
		}
	}
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return strconv.Itoa(n) + " attempts"
}

// permanentError marks an answer that a retry cannot change (4xx other than 429, 3xx).
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// post makes one request. It returns the status on success; on failure a redacted error
// and, for 429 / 503 with a Retry-After header, the wait the endpoint asked for.
func (s *Sender) post(ctx context.Context, body []byte) (status int, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, permanentError{errors.New(s.cleanError(err))}
	}
	req.Header = s.headers.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, 0, errors.New(s.cleanError(err))
	}
	defer resp.Body.Close()
	// Read a little of the answer for the error message, and drain a bounded amount more so
	// the connection can be reused.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, 0, nil
	}
	err = fmt.Errorf("endpoint answered %s%s", resp.Status, s.describeBody(snippet))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return resp.StatusCode, parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()), err
	default:
		return resp.StatusCode, 0, permanentError{err}
	}
}

func (s *Sender) describeBody(b []byte) string {
	text := strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
	if text == "" {
		return ""
	}
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	return ": " + s.redact.Replace(text)
}

// cleanError drops the URL that *url.Error carries and removes any remaining secret text
// (a proxy error, a host name in a dial error, an echoed header).
func (s *Sender) cleanError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "request timed out after " + s.opts.RequestTimeout.String() + " (" + s.redact.Replace(err.Error()) + ")"
	}
	return s.redact.Replace(err.Error())
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date. Zero when absent or
// unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// validHeaderName reports whether k is an HTTP token (RFC 9110, section 5.6.2).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r > 0x7e || !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// validHeaderValue rejects control characters (a newline would split the header).
func validHeaderValue(v string) bool {
	for _, r := range v {
		if r < ' ' && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}

// jitter spreads retries of many senders: a wait between half and all of d.
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(half+1)
}

// urlSecrets lists the parts of u that may carry a credential or identify the endpoint.
func urlSecrets(u *url.URL) []string {
	out := []string{u.String(), u.Redacted(), u.Host, u.Hostname(), u.RawQuery, u.EscapedPath(), u.Path, u.Fragment}
	if u.User != nil {
		out = append(out, u.User.String(), u.User.Username())
		if p, ok := u.User.Password(); ok {
			out = append(out, p, url.QueryEscape(p))
		}
	}
	return out
}

// newRedactor replaces each secret, longest first. Secrets shorter than 4 bytes (a path of
// "/", a one-letter header value) are skipped: replacing them would mangle every message
// without hiding anything worth hiding.
func newRedactor(secrets []string) *strings.Replacer {
	seen := map[string]bool{}
	var list []string
	for _, s := range secrets {
		if len(s) >= 4 && !seen[s] {
			seen[s] = true
			list = append(list, s)
		}
	}
	sort.Slice(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	pairs := make([]string, 0, 2*len(list))
	for _, s := range list {
		pairs = append(pairs, s, "<redacted>")
	}
	return strings.NewReplacer(pairs...)
}
