// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The package's tests take turns on shared clusters (sandboxtest.Shared), stopped here. Tests
// that run a built binary run in parallel; tests that call run() in this process do not, as a
// daemon command routes klog's process-wide logger.
func TestMain(m *testing.M) { sandboxtest.Main(m) }
