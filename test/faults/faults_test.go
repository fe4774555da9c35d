// SPDX-License-Identifier: Apache-2.0

package faults

import "testing"

// TestFaults runs the scenarios, on one sandbox cluster. Run one alone with, e.g.,
// -run 'TestFaults/crash/agent'.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end fault scenarios against the sandbox")
	}
	t.Parallel() // beside TestAPIServerRestart, which has a cluster of its own
	w := newWorld(t)
	t.Run("crash", func(t *testing.T) { testCrash(t, w) })
	t.Run("storm", func(t *testing.T) { testStorm(t, w, false) })
	t.Run("storm-mixed", func(t *testing.T) {
		if !fullRun() {
			t.Skip("full run only (LIFEBOAT_FAULTS_FULL=1): the short run has one storm")
		}
		testStorm(t, w, true)
	})
	t.Run("regressions", func(t *testing.T) { testRegressions(t, w) })
	// Outages mostly wait: they run side by side.
	t.Run("outages", func(t *testing.T) {
		t.Run("aws", func(t *testing.T) { t.Parallel(); testAWSOutages(t, w) })
		t.Run("imds", func(t *testing.T) { t.Parallel(); testIMDSOutages(t, w) })
	})
}
