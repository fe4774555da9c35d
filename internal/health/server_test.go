// SPDX-License-Identifier: Apache-2.0

package health

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbesTellTheTruth(t *testing.T) {
	var sourceErr error
	srv := httptest.NewServer(Handler("/healthz", func() error { return sourceErr }))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Errorf("healthy source: readyz %d", code)
	}
	sourceErr = errors.New("spot/instance-action failing for 31s (62 polls): 500")
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "failing for 31s") {
		t.Errorf("failing source: readyz %d %q", code, body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("liveness %d while the source fails: restarting would not fix the source", code)
	}
}
