// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/middleware"
)

// Deadlines bound every AWS call made through a configuration, its retries included, so that
// an endpoint that accepts a connection and never answers turns into an error (and a failing
// readiness check) instead of a loop that waits for ever. The SDK's HTTP client has no
// response timeout of its own.
type Deadlines struct {
	// Call bounds one call of any operation except a long-polling receive.
	Call time.Duration
	// ReceiveMargin is added to an SQS ReceiveMessage's long-poll wait, which the queue may
	// legitimately spend waiting for a message.
	ReceiveMargin time.Duration
}

// DefaultDeadlines are what LoadAWSConfig installs. A call answers in well under a second;
// the rest is room for the SDK's retries of a throttled or failed attempt.
var DefaultDeadlines = Deadlines{Call: 20 * time.Second, ReceiveMargin: 10 * time.Second}

// maxReceiveWait is the longest long-poll SQS allows, which a receive asking for no wait of
// its own may get from the queue's ReceiveMessageWaitTimeSeconds.
const maxReceiveWait = 20 * time.Second

// deadlineMiddlewareID names the middleware in the SDK's stack.
const deadlineMiddlewareID = "LifeboatCallDeadline"

// WithDeadlines returns cfg with d applied to every operation of every client built from it.
// A context that ends sooner still wins.
func WithDeadlines(cfg aws.Config, d Deadlines) aws.Config {
	cfg.APIOptions = append(slices.Clone(cfg.APIOptions), func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc(deadlineMiddlewareID, d.handle), middleware.Before)
	})
	return cfg
}

// For is the deadline of one call of the operation with its input.
func (d Deadlines) For(params any) time.Duration {
	if wait, ok := receiveWait(params); ok {
		if wait <= 0 || wait > maxReceiveWait {
			wait = maxReceiveWait
		}
		return wait + d.ReceiveMargin
	}
	return d.Call
}

// The input type of SQS's ReceiveMessage, known by name: the agent's binary links no SQS
// client (see package controlleronly), and this package is in it.
const (
	sqsPackage      = "github.com/aws/aws-sdk-go-v2/service/sqs"
	receiveInput    = "ReceiveMessageInput"
	receiveWaitName = "WaitTimeSeconds"
)

// receiveWait is the long-poll wait an SQS ReceiveMessage input asks for, and whether params
// is one.
func receiveWait(params any) (time.Duration, bool) {
	v := reflect.ValueOf(params)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0, false
	}
	v = v.Elem()
	if t := v.Type(); t.Kind() != reflect.Struct || t.PkgPath() != sqsPackage || t.Name() != receiveInput {
		return 0, false
	}
	f := v.FieldByName(receiveWaitName)
	if !f.IsValid() || !f.CanInt() {
		return 0, true
	}
	return time.Duration(f.Int()) * time.Second, true
}

func (d Deadlines) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	limit := d.For(in.Parameters)
	if limit <= 0 {
		return next.HandleInitialize(ctx, in)
	}
	// The operations Lifeboat calls answer with their whole body, read before the call
	// returns, so the context may end with it.
	callCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	out, md, err := next.HandleInitialize(callCtx, in)
	if err != nil && ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		err = &CallTimeoutError{Service: middleware.GetServiceID(ctx), Operation: middleware.GetOperationName(ctx), Limit: limit, Err: err}
	}
	return out, md, err
}

// CallTimeoutError is an AWS call that did not finish within its deadline. It matches
// context.DeadlineExceeded with errors.Is.
type CallTimeoutError struct {
	Service, Operation string
	Limit              time.Duration
	Err                error
}

// Error does not repeat the service and operation: the SDK's error around it names them.
func (e *CallTimeoutError) Error() string {
	return fmt.Sprintf("no answer within the call's %s deadline: %v", e.Limit, e.Err)
}

func (e *CallTimeoutError) Unwrap() error { return e.Err }

// Is makes the error a context.DeadlineExceeded even when the SDK's own error hides it.
func (e *CallTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
