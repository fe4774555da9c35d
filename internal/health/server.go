// SPDX-License-Identifier: Apache-2.0

// Package health serves Lifeboat's probes. Liveness (PROBES_SERVER_ENDPOINT, /healthz by
// default) answers while the process serves requests at all; readiness (/readyz) tells the
// truth about the notice source: it fails while the source (instance metadata, the queue)
// has been failing, so a broken source is visible instead of hidden behind a constant OK.
package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Checker reports whether a source is healthy (nil) or why not.
type Checker func() error

// Handler serves liveness on livenessPath and readiness on /readyz.
func Handler(livenessPath string, ready Checker) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(livenessPath, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Limits bound what clients can hold of a server. Lifeboat's servers listen on the node's
// network, so every client is a stranger until proven otherwise: a connection that sends
// slowly, stays idle or sends oversized headers is cut off, and connections beyond MaxConns
// are refused instead of queueing. A zero duration or count leaves that bound off.
type Limits struct {
	// ReadHeaderTimeout ends a connection whose request headers have not all arrived in time.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, its body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of a request's headers to the end of its response.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for its next request
	// (zero: ReadTimeout, as in net/http).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (net/http allows a little slack above it);
	// larger headers are answered 431. Zero means net/http's default, 1 MiB.
	MaxHeaderBytes int
	// MaxConns is how many connections are served at once; each one past it is accepted and
	// reset at once, so it holds neither a goroutine nor a place in the kernel's queue.
	MaxConns int
}

// DefaultLimits are the bounds of the probes and metrics servers. A kubelet probe or a
// Prometheus scrape is one small request, answered in milliseconds; the bounds leave them
// ample room and nothing more.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    8 << 10,
		MaxConns:          64,
	}
}

// Option changes how Serve serves.
type Option func(*options)

type options struct {
	limits  Limits
	logger  *slog.Logger
	refused func()
}

// WithLimits replaces DefaultLimits.
func WithLimits(l Limits) Option { return func(o *options) { o.limits = l } }

// WithLogger logs refused connections: the first, then at most one line a minute with how
// many were refused since, so a flood cannot flood the log too.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithRefused calls count for every connection refused past Limits.MaxConns.
func WithRefused(count func()) Option { return func(o *options) { o.refused = count } }

// Serve answers on ln until ctx ends, within DefaultLimits unless told otherwise. The caller
// opens ln at start, so a port already taken stops the process there, naming the port,
// instead of leaving it running with probes that can never answer.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, opts ...Option) error {
	o := options{limits: DefaultLimits()}
	for _, opt := range opts {
		opt(&o)
	}
	l := o.limits
	if l.MaxConns > 0 {
		ln = &limitListener{Listener: ln, slots: make(chan struct{}, l.MaxConns), refused: o.refused, logger: o.logger}
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
	if o.logger != nil {
		srv.ErrorLog = slog.NewLogLogger(o.logger.Handler(), slog.LevelWarn)
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(shutdown) != nil {
			srv.Close()
		}
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// refusalLogEvery is how often a refusal is logged at most.
const refusalLogEvery = time.Minute

// limitListener hands the server at most cap(slots) connections at once. Unlike a listener
// that stops accepting at the limit (extra connections then wait in the kernel's backlog,
// unanswered, and are served long after their client gave up), it accepts each extra
// connection and resets it: the client learns at once, and nothing of it stays behind.
type limitListener struct {
	net.Listener
	slots   chan struct{}
	refused func()
	logger  *slog.Logger

	mu       sync.Mutex
	lastLog  time.Time
	unlogged int
	everTold bool
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			l.refuse(c)
		}
	}
}

func (l *limitListener) refuse(c net.Conn) {
	// A reset instead of an orderly close: no TIME_WAIT left on this side per refusal.
	if tcp, ok := c.(interface{ SetLinger(int) error }); ok {
		tcp.SetLinger(0)
	}
	c.Close()
	if l.refused != nil {
		l.refused()
	}
	if l.logger == nil {
		return
	}
	l.mu.Lock()
	l.unlogged++
	now := time.Now()
	if l.everTold && now.Sub(l.lastLog) < refusalLogEvery {
		l.mu.Unlock()
		return
	}
	n := l.unlogged
	l.everTold, l.lastLog, l.unlogged = true, now, 0
	l.mu.Unlock()
	l.logger.Warn("connections refused: the server is at its connection limit",
		"addr", l.Addr().String(), "limit", cap(l.slots), "refused", n, "lastFrom", c.RemoteAddr().String())
}

// limitedConn gives its slot back when the server closes it.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite lets net/http half-close before closing after an error answer (a 431), so the
// client reads the answer instead of a reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
