package kube

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// RequestObserver is told of every request a client sends: which client (main, cordon, lease),
// the Kubernetes verb, the resource ("pods/eviction" for a subresource, "-" for paths outside
// the resource API), the HTTP status code ("error" when no answer came) and how long it took.
type RequestObserver interface {
	KubeRequest(client, verb, resource, code string, took time.Duration)
}

// Observers tells each of its members of every request.
type Observers []RequestObserver

func (o Observers) KubeRequest(client, verb, resource, code string, took time.Duration) {
	for _, each := range o {
		each.KubeRequest(client, verb, resource, code, took)
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
	t.observe.KubeRequest(t.client, verb, resource, code, time.Since(start))
	return resp, err
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
