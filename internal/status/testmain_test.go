// SPDX-License-Identifier: Apache-2.0

package status_test

import (
	"testing"

	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The package's tests take turns on shared clusters (sandboxtest.Shared), stopped here.
func TestMain(m *testing.M) { sandboxtest.Main(m) }
