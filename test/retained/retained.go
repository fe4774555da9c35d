// SPDX-License-Identifier: Apache-2.0

// Package retained measures the heap a value keeps alive, for memory benchmarks.
package retained

import "runtime"

// MiB is how much heap what build returns keeps alive after a collection, in MiB: the
// difference in live heap around build, each side measured after a GC.
func MiB(build func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
}
