// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

// sqsOperation returns the SQS operation of a JSON-protocol SQS request.
func sqsOperation(r *http.Request) (string, bool) {
	return strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
}

// proxyErrKey carries a *string through the proxied request's context, so the
// proxy's ErrorHandler can tell serveSQS that the backend failed.
type proxyErrKey struct{}

func newSQSProxy(backend string) (*httputil.ReverseProxy, error) {
	target, err := url.Parse(backend)
	if err != nil || target.Scheme == "" || target.Host == "" {
		return nil, fmt.Errorf("fakeaws: invalid SQSBackend %q", backend)
	}
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// Keep the client's Host header: it is covered by the SigV4
			// signature, and queue URLs a backend derives from it then point
			// back at this fake.
			r.Out.Host = r.In.Host
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			const code = "ServiceUnavailable"
			if p, ok := r.Context().Value(proxyErrKey{}).(*string); ok {
				*p = code
			}
			writeJSONError(w, http.StatusBadGateway, code, "fakeaws: SQS backend unreachable: "+err.Error())
		},
	}, nil
}

// serveSQS records an SQS request and forwards it to the backend unchanged.
// For proxied calls the recorded ErrorCode reflects only failures of the fake
// itself (faults, missing or unreachable backend), not the backend's answers.
func (s *Server) serveSQS(w http.ResponseWriter, r *http.Request, op string) {
	at := time.Now()
	// Keep the body for the record and hand the proxy an identical copy.
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	call := Call{Service: "sqs", Action: op, At: at, Body: string(body)}
	if err != nil {
		// A body cut short (its sender killed mid-request) is refused, never forwarded: the
		// OnCall function sees it as failed from the start.
		call.ErrorCode = "InvalidRequest"
	}
	idx, reqID := s.record(call)
	fail := func(status int, code, msg string) {
		s.setErrorCode(idx, code)
		w.Header().Set("X-Amzn-RequestId", reqID)
		writeJSONError(w, status, code, msg)
	}
	if err != nil {
		fail(http.StatusBadRequest, "InvalidRequest", "fakeaws: reading the request body: "+err.Error())
		return
	}
	if f, ok := s.activeFault("sqs", op, at); ok {
		fail(f.Status, f.Code, "fakeaws: injected fault")
		return
	}
	if op == "GetQueueAttributes" && s.queueAttributes(w, body) {
		return
	}
	switch {
	case s.backendErr != nil:
		fail(http.StatusNotImplemented, "NotImplemented", s.backendErr.Error())
		return
	case s.proxy == nil:
		fail(http.StatusNotImplemented, "NotImplemented", "fakeaws: no SQS backend configured (Options.SQSBackend); cannot serve AmazonSQS."+op)
		return
	}
	var code string
	s.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proxyErrKey{}, &code)))
	if code != "" {
		s.setErrorCode(idx, code)
	}
}

// writeJSONError writes an error in the awsJson1.0 format aws-sdk-go-v2's
// SQS client decodes.
func writeJSONError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Query-Error", code+";"+faultType(status))
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + code, "message": msg})
}
