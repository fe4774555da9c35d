// Package health serves Lifeboat's probes. Liveness (PROBES_SERVER_ENDPOINT, /healthz by
// default) answers while the process serves requests at all; readiness (/readyz) tells the
// truth about the notice source: it fails while the source (instance metadata, the queue)
// has been failing, so a broken source is visible instead of hidden behind a constant OK.
package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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

// Serve answers on ln until ctx ends. The caller opens ln at start, so a port already
// taken stops the process there, naming the port, instead of leaving it running with probes
// that can never answer.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
