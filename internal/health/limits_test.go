// SPDX-License-Identifier: Apache-2.0

package health

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// patience bounds every wait of these tests. The limits under test are far shorter; it only
// keeps a server that never cuts a client off from hanging the test.
const patience = 10 * time.Second

// serve starts Serve on a loopback port with h (the probes when nil) and returns its address.
func serve(t *testing.T, h http.Handler, opts ...Option) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if h == nil {
		h = Handler("/healthz", func() error { return nil })
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, opts...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// shortLimits are DefaultLimits with one bound changed.
func shortLimits(change func(*Limits)) Option {
	l := DefaultLimits()
	change(&l)
	return WithLimits(l)
}

// get sends one keep-alive request for path on c and reads its answer.
func get(c net.Conn, r *bufio.Reader, path string) (*http.Response, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: node\r\n\r\n", path); err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(patience))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// dialGet dials addr and sends one request, keeping the connection open.
func dialGet(t *testing.T, addr string) (net.Conn, *http.Response, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err // a reset comes here on loopback: the caller judges it
	}
	t.Cleanup(func() { c.Close() })
	resp, err := get(c, bufio.NewReader(c), "/healthz")
	return c, resp, err
}

// closedByServer reads c until it ends and reports how: nil when the server closed or reset
// it, an error when it was still open after patience or the server answered.
func closedByServer(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(patience))
	b, err := io.ReadAll(c)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("still open after %v", patience)
	case bytes.HasPrefix(b, []byte("HTTP/1.1 2")):
		return fmt.Errorf("served: %q", firstLine(b))
	case err == nil, errors.Is(err, syscall.ECONNRESET):
		return nil
	default:
		return err
	}
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\r\n")
	return line
}

func TestConnectionsPastTheLimitAreRefused(t *testing.T) {
	var refused atomic.Int32
	refusals := make(chan struct{}, 16) // one per refusal counted
	var logs syncBuffer
	addr := serve(t, nil,
		shortLimits(func(l *Limits) { l.MaxConns = 2 }),
		WithRefused(func() { refused.Add(1); refusals <- struct{}{} }),
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	// Two clients hold the two places with keep-alive connections.
	var held []net.Conn
	for i := range 2 {
		c, resp, err := dialGet(t, addr)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("client %d within the limit: %v %v", i, resp, err)
		}
		held = append(held, c)
	}
	// Every further client is accepted by the kernel and reset by the server at once, not
	// served and not left waiting (on loopback the reset can come before the dial returns).
	for i := range 3 {
		c, err := net.Dial("tcp", addr)
		if errors.Is(err, syscall.ECONNRESET) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n")
		if err := closedByServer(c); err != nil {
			t.Errorf("client %d past the limit: %v", i, err)
		}
		c.Close()
	}
	for range 3 {
		select {
		case <-refusals:
		case <-time.After(patience):
			t.Fatalf("%d refusals counted, want 3", refused.Load())
		}
	}
	if n := refused.Load(); n != 3 {
		t.Fatalf("%d refusals counted, want 3", n)
	}
	// A flood is logged once, not once per connection.
	if got := strings.Count(logs.String(), "connection limit"); got != 1 {
		t.Errorf("%d log lines for three refusals, want 1:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "limit=2") {
		t.Errorf("the log line does not name the limit:\n%s", logs.String())
	}

	// A place given back serves the next client.
	held[0].Close()
	waitFor(t, "a client served after one left", func() bool {
		// Until the server has seen the place given back, a dial may still be reset.
		c, resp, err := dialGet(t, addr)
		if c != nil {
			c.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	addr := serve(t, nil, shortLimits(func(l *Limits) { l.IdleTimeout = 200 * time.Millisecond }))
	c, resp, err := dialGet(t, addr)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("first request: %v %v, want a kept-alive 200", resp, err)
	}
	if err := closedByServer(c); err != nil {
		t.Errorf("idle keep-alive connection: %v", err)
	}
}

func TestSlowClientsAreCutOff(t *testing.T) {
	bodyErr := make(chan error, 1)
	readsBody := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		bodyErr <- err
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	for _, tc := range []struct {
		name   string
		limits func(*Limits)
		head   string
		drip   string // sent a piece every 50 ms after head, for longer than patience
	}{
		{
			name:   "headers",
			limits: func(l *Limits) { l.ReadHeaderTimeout = 200 * time.Millisecond },
			head:   "GET /healthz HTTP/1.1\r\nHost: node\r\n",
			drip:   "X-Drip: 1\r\n",
		},
		{
			name:   "body",
			limits: func(l *Limits) { l.ReadTimeout = 300 * time.Millisecond },
			head:   "POST /upload HTTP/1.1\r\nHost: node\r\nContent-Length: 100000\r\n\r\n",
			drip:   "x",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, readsBody, shortLimits(tc.limits))
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			stop := make(chan struct{})
			var dripping sync.WaitGroup
			dripping.Go(func() {
				if _, err := io.WriteString(c, tc.head); err != nil {
					return
				}
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for deadline := time.After(2 * patience); ; {
					select {
					case <-stop:
						return
					case <-deadline:
						return
					case <-tick.C:
						if _, err := io.WriteString(c, tc.drip); err != nil {
							return
						}
					}
				}
			})
			err = closedByServer(c)
			close(stop)
			dripping.Wait()
			if err != nil {
				t.Errorf("a client sending its %s slowly: %v", tc.name, err)
			}
			if tc.name == "body" {
				select {
				case err := <-bodyErr:
					if err == nil {
						t.Error("the handler read the whole slow body")
					}
				case <-time.After(patience):
					t.Error("the handler is still reading the slow body")
				}
			}
		})
	}
}

func TestOversizedHeadersGet431(t *testing.T) {
	addr := serve(t, nil) // DefaultLimits
	for _, tc := range []struct {
		size int
		want int
	}{
		{1 << 10, http.StatusOK},
		{4 << 10, http.StatusOK},
		{16 << 10, http.StatusRequestHeaderFieldsTooLarge},
		{64 << 10, http.StatusRequestHeaderFieldsTooLarge},
	} {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Padding", strings.Repeat("p", tc.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%d-byte header: %v", tc.size, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%d-byte header: %d, want %d", tc.size, resp.StatusCode, tc.want)
		}
	}
}

// waitFor polls ok against the real server: it gives no sign of a connection's place given
// back but a dial that is served.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(patience); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", patience, what)
		}
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
