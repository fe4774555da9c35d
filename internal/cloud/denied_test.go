// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"
)

func TestDenied(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code string
	}{
		{&smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized"}, "UnauthorizedOperation"},
		{fmt.Errorf("describe: %w", &smithy.GenericAPIError{Code: "AccessDenied"}), "AccessDenied"},
		{errors.Join(ErrAccessDenied, errors.New("elbv2")), "AccessDenied"},
		{&smithy.GenericAPIError{Code: "Throttling"}, ""},
		{errors.New("connection refused"), ""},
		{nil, ""},
	} {
		code, ok := Denied(tc.err)
		if code != tc.code || ok != (tc.code != "") {
			t.Errorf("Denied(%v) = %q, %v; want %q", tc.err, code, ok, tc.code)
		}
	}
	if got := IAMAction("DescribeInstances"); got != "ec2:DescribeInstances" {
		t.Errorf("IAMAction(DescribeInstances) = %q", got)
	}
	if got := IAMAction("CompleteLifecycleAction"); got != "autoscaling:CompleteLifecycleAction" {
		t.Errorf("IAMAction(CompleteLifecycleAction) = %q", got)
	}
}
