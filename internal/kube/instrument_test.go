// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestRequestKind(t *testing.T) {
	for _, tt := range []struct {
		method, path, watch string
		verb, resource      string
	}{
		{"GET", "/api/v1/nodes", "", "list", "nodes"},
		{"GET", "/api/v1/nodes", "true", "watch", "nodes"},
		{"GET", "/api/v1/nodes/ip-10-0-0-1", "", "get", "nodes"},
		{"PATCH", "/api/v1/nodes/ip-10-0-0-1", "", "patch", "nodes"},
		{"PUT", "/api/v1/nodes/ip-10-0-0-1/status", "", "update", "nodes/status"},
		{"GET", "/api/v1/pods", "", "list", "pods"},
		{"GET", "/api/v1/namespaces/shop/pods", "", "list", "pods"},
		{"POST", "/api/v1/namespaces/shop/pods/web-0/eviction", "", "create", "pods/eviction"},
		{"DELETE", "/api/v1/namespaces/shop/pods/web-0", "", "delete", "pods"},
		{"DELETE", "/api/v1/namespaces/shop/pods", "", "deletecollection", "pods"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/default/events", "", "create", "events"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/lifeboat", "", "update", "leases"},
		{"GET", "/api/v1/namespaces/shop", "", "get", "namespaces"},
		{"GET", "/api/v1/namespaces", "", "list", "namespaces"},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "", "create", "selfsubjectaccessreviews"},
		{"GET", "/version", "", "get", "-"},
		{"GET", "/api", "", "get", "-"},
		{"GET", "/apis/policy/v1", "", "get", "-"},
	} {
		verb, resource := RequestKind(tt.method, tt.path, tt.watch)
		if verb != tt.verb || resource != tt.resource {
			t.Errorf("%s %s watch=%q: got %s %s, want %s %s", tt.method, tt.path, tt.watch, verb, resource, tt.verb, tt.resource)
		}
	}
}

type recorded struct{ client, verb, resource, code string }

type recorder struct {
	mu   sync.Mutex
	seen []recorded
}

func (r *recorder) KubeRequest(client, verb, resource, code string, _ bool, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, recorded{client, verb, resource, code})
}

// Each client built from an instrumented copy reports its requests once, under its own name,
// with the answer's code; the base config stays as it was.
func TestInstrumented(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}`)
	}))
	defer srv.Close()
	base := &rest.Config{Host: srv.URL}
	rec := &recorder{}
	main, err := NewClientset(Instrumented(base, "main", rec))
	if err != nil {
		t.Fatal(err)
	}
	cordon, err := NewClientset(Instrumented(base, "cordon", rec))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := main.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cordon.CoreV1().Nodes().Get(ctx, "missing", metav1.GetOptions{}); err == nil {
		t.Fatal("no error for a missing node")
	}
	want := []recorded{{"main", "get", "nodes", "200"}, {"cordon", "get", "nodes", "404"}}
	if !slices.Equal(rec.seen, want) {
		t.Errorf("recorded %v, want %v", rec.seen, want)
	}
	if base.WrapTransport != nil {
		t.Error("the base config was wrapped")
	}
}
