// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// answer is one request as an observer heard it.
type answer struct {
	resource, code string
	throttled      bool
}

type answers struct {
	mu   sync.Mutex
	seen []answer
}

func (a *answers) KubeRequest(_, _, resource, code string, throttled bool, _ time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, answer{resource, code, throttled})
}

// budgetStatus is the eviction API's refusal by a disruption budget, as the API server words it.
func budgetStatus() *metav1.Status {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 2 healthy pods and has 2 currently"})
	s := err.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	return &s
}

// A 429 answered to an eviction with a Status naming a disruption budget is the budget's
// refusal, in JSON or protobuf; a 429 in plain text (API Priority and Fairness, the in-flight
// limit) is throttling, on an eviction or anything else. The client still reads the refusal's
// cause after the observer looked at it.
func TestThrottledIsNotABudgetsRefusal(t *testing.T) {
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "10")
		switch {
		case strings.Contains(r.URL.Path, "/pods/json-budget/"):
			w.Header().Set("Content-Type", runtime.ContentTypeJSON)
			w.WriteHeader(http.StatusTooManyRequests)
			if err := scheme.Codecs.LegacyCodec(metav1.SchemeGroupVersion).Encode(budgetStatus(), w); err != nil {
				t.Error(err)
			}
		case strings.Contains(r.URL.Path, "/pods/proto-budget/"):
			var b bytes.Buffer
			if err := pb.Encode(budgetStatus(), &b); err != nil {
				t.Error(err)
			}
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write(b.Bytes())
		default: // as the API server's flow control answers
			http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	for _, proto := range []bool{false, true} {
		t.Run(fmt.Sprintf("protobuf=%v", proto), func(t *testing.T) {
			base := &rest.Config{Host: srv.URL}
			if proto {
				base.ContentType = runtime.ContentTypeProtobuf
				base.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
			}
			seen := &answers{}
			cs, err := NewClientset(Instrumented(base, "main", seen))
			if err != nil {
				t.Fatal(err)
			}
			rc := cs.PolicyV1().RESTClient().(*rest.RESTClient)
			evict := func(pod string) error {
				e := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "shop"}}
				return rc.Post().AbsPath("/api/v1").Namespace("shop").Resource("pods").Name(pod).SubResource("eviction").
					Body(e).MaxRetries(0).Do(context.Background()).Error()
			}
			for _, pod := range []string{"json-budget", "proto-budget"} {
				err := evict(pod)
				if !apierrors.IsTooManyRequests(err) || !apierrors.HasStatusCause(err, policyv1.DisruptionBudgetCause) {
					t.Errorf("%s: the client got %v; want the budget's refusal with its cause", pod, err)
				}
			}
			if err := evict("flow-control"); !apierrors.IsTooManyRequests(err) || apierrors.HasStatusCause(err, policyv1.DisruptionBudgetCause) {
				t.Errorf("flow-control: the client got %v; want a 429 without a budget", err)
			}
			// Without retries: client-go would wait out each Retry-After.
			err = cs.CoreV1().RESTClient().Patch(types.MergePatchType).Resource("nodes").Name("n").Body([]byte(`{}`)).
				MaxRetries(0).Do(context.Background()).Error()
			if !apierrors.IsTooManyRequests(err) {
				t.Errorf("patch: %v, want a 429", err)
			}
			want := []answer{{"pods/eviction", "429", false}, {"pods/eviction", "429", false}, {"pods/eviction", "429", true}, {"nodes", "429", true}}
			if fmt.Sprint(seen.seen) != fmt.Sprint(want) {
				t.Errorf("observed %v, want %v", seen.seen, want)
			}
		})
	}
}
