// SPDX-License-Identifier: Apache-2.0

//go:build race

package webhook

// allocCeiling is what a render may allocate in the tests. Under the race detector sync.Pool
// keeps nothing, so regexp allocates a matcher for each match: renders allocate many times
// more than they do in a build without it, still far less than what the refused calls ask for.
const allocCeiling = 1 << 30
