// SPDX-License-Identifier: Apache-2.0

//go:build !race

package webhook

// allocCeiling is what a render may allocate in the tests: far less than what the refused
// calls ask for, far more than any render needs.
const allocCeiling = 64 << 20
