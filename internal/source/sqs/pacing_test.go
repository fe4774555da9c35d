// SPDX-License-Identifier: Apache-2.0

package sqs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Against a queue that answers 500, each call the consumer retries itself reaches the queue
// once per try of the consumer's: the SDK's own retries (three attempts by default) do not
// multiply them.
func TestConsumerPacesItsOwnRetries(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"__type":"InternalError","message":"try again"}`))
	}))
	defer srv.Close()
	api := awssqs.New(awssqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
	if api.Options().RetryMaxAttempts > 1 {
		t.Fatalf("the client's own retry setting is %d: the test wants the SDK's default", api.Options().RetryMaxAttempts)
	}
	c := testConsumer(api, ConsumerOptions{})
	ctx := context.Background()

	requests.Store(0)
	if _, err := c.receive(ctx, 1); err == nil {
		t.Fatal("a receive from a queue answering 500 succeeded")
	}
	if got := requests.Load(); got != 1 {
		t.Errorf("one failed receive made %d requests, want 1: the consumer's backoff paces receives", got)
	}

	requests.Store(0)
	c.deleteTombstoned(ctx, "m-1", "handle-1")
	if got := requests.Load(); got != int32(c.deleteAttempts) {
		t.Errorf("a delete made %d requests, want %d (the consumer's attempts)", got, c.deleteAttempts)
	}
}
