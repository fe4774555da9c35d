// SPDX-License-Identifier: Apache-2.0

package agent_test

import (
	"testing"

	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// sandboxtest.Main gives the package's tests static AWS keys (never instance metadata) and lets
// TestAgentEndToEnd's cases, each on a node of its own, run side by side.
func TestMain(m *testing.M) { sandboxtest.Main(m) }
