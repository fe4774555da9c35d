// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// RequestObserver is told of every request a client sends: which client (main, cordon, lease),
// the Kubernetes verb, the resource ("pods/eviction" for a subresource, "-" for paths outside
// the resource API), the HTTP status code ("error" when no answer came), whether the server
// throttled it (a 429 that is not a disruption budget's refusal of an eviction) and how long
// it took.
type RequestObserver interface {
	KubeRequest(client, verb, resource, code string, throttled bool, took time.Duration)
}

// Observers tells each of its members of every request.
type Observers []RequestObserver

func (o Observers) KubeRequest(client, verb, resource, code string, throttled bool, took time.Duration) {
	for _, each := range o {
		each.KubeRequest(client, verb, resource, code, throttled, took)
	}
}

// Instrumented returns a copy of rc whose requests are reported to observe under the client's
// name. The copy, not rc, is wrapped: clients built from one base config each count once.
func Instrumented(rc *rest.Config, client string, observe RequestObserver) *rest.Config {
	c := rest.CopyConfig(rc)
	if observe == nil {
		return c
	}
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &observedTransport{next: rt, client: client, observe: observe}
	})
	return c
}

type observedTransport struct {
	next    http.RoundTripper
	client  string
	observe RequestObserver
}

func (t *observedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	verb, resource := RequestKind(req.Method, req.URL.Path, req.URL.Query().Get("watch"))
	throttled := err == nil && resp.StatusCode == http.StatusTooManyRequests && !(resource == "pods/eviction" && budgetRefusal(resp))
	t.observe.KubeRequest(t.client, verb, resource, code, throttled, time.Since(start))
	return resp, err
}

// maxStatusBody bounds how much of a refused eviction's answer is read to tell why: a Status
// is far smaller.
const maxStatusBody = 64 << 10

// budgetRefusal reports whether a 429 answer to an eviction is a disruption budget's refusal:
// a Status (JSON or protobuf, as negotiated) with the DisruptionBudget cause. API Priority and
// Fairness and the in-flight limit answer 429 in plain text. The body is read and put back
// for the client, which decodes it again.
func budgetRefusal(resp *http.Response) bool {
	if resp.Body == nil {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBody))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
	if err != nil {
		return false
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	status, ok := obj.(*metav1.Status)
	if err != nil || !ok || status.Details == nil {
		return false
	}
	for _, c := range status.Details.Causes {
		if c.Type == policyv1.DisruptionBudgetCause {
			return true
		}
	}
	return false
}

// RequestKind names a request as the API server's audit log would: the verb (get, list,
// watch, create, update, patch, delete, deletecollection) and the resource, with its
// subresource after a slash. Paths outside /api and /apis give the lower-cased method and "-".
func RequestKind(method, path, watch string) (verb, resource string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api/v1
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:] // apis/group/version
	default:
		return strings.ToLower(method), "-"
	}
	// namespaces/<ns>/<resource>... addresses a namespaced resource; namespaces[/<ns>[/status]]
	// is the Namespace itself.
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 || parts[0] == "" {
		return strings.ToLower(method), "-"
	}
	resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	switch method {
	case http.MethodGet:
		switch {
		case watch == "true" || watch == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(method)
	}
	return verb, resource
}
